import configparser
import os


def _files():
    env = os.getenv("TORCHXCONFIG")
    if env is not None:
        return [env] if env else []
    return [p for p in (os.path.join(os.path.expanduser("~"), ".torchxconfig"), os.path.join(os.getcwd(), ".torchxconfig"))
            if os.access(p, os.R_OK)]


def load_sections(prefix, dirs=None):
    sections = {}
    for path in _files():
        parser = configparser.ConfigParser(delimiters=("=", ":"))
        parser.optionxform = str
        parser.read(path)
        for name in parser.sections():
            head, _, rest = name.partition(":")
            if head == prefix and rest:
                section = sections.setdefault(rest, {})
                for k, v in parser.items(name):
                    section.setdefault(k, v)
    return sections
