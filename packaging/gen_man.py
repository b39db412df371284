#!/usr/bin/env python3
"""Writes a man page (roff) from a program's own --help: the main help, then
each subcommand's `PROG CMD --help` (CLI11's "Subcommands:" list), so the
page says exactly what the binary says; then the hand-written sections of
man/NAME.SECTION.in (EXAMPLES, ENVIRONMENT, FILES, EXIT STATUS). Help lines
are wrapped to fit 80 columns, an option's description under itself.

    gen_man.py BINARY NAME SECTION OUTPUT "one-line description"
"""
import os
import re
import subprocess
import sys

WIDTH = 78  # columns of text; man's own margin makes 80


def run_help(argv):
    done = subprocess.run(argv + ["--help"], capture_output=True, text=True, timeout=30)
    return done.stdout


def wrap(line):
    """Splits a help line longer than WIDTH on spaces; what follows an option
    (CLI11 pads it to a column) goes on under that column."""
    if len(line) <= WIDTH:
        return [line]
    indent = len(line) - len(line.lstrip())
    m = re.match(r"^(\s+\S.*?\s{2,})(\S)", line)
    hang = len(m.group(1)) if m and len(m.group(1)) < WIDTH // 2 else indent
    out, current = [], ""
    for sep, word in re.findall(r"(\s*)(\S+)", line):
        if not current:
            current = sep + word
        elif len(current) + len(sep if not out else " ") + len(word) <= WIDTH:
            current += (sep if not out else " ") + word  # the first line keeps its columns
        else:
            out.append(current)
            # A word too long for the column starts nearer the margin.
            current = " " * (hang if hang + len(word) <= WIDTH else indent + 4) + word
    out.append(current)
    return out


def roff_text(text):
    out = []
    for line in [w for l in text.rstrip("\n").split("\n") for w in wrap(l)]:
        line = line.replace("\\", "\\e")
        if line.startswith((".", "'")):
            line = "\\&" + line
        out.append(line)
    return "\n".join(out)


def main():
    binary, name, section, output, summary = sys.argv[1:6]
    version = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=30).stdout.split()[-1]
    main_help = run_help([binary])
    page = [f'.TH {name.upper()} {section} "" "torchxd {version}" "torchxd"',
            ".SH NAME", f"{name} \\- {summary}",
            ".SH SYNOPSIS", f".B {name}", "[\\fIOPTIONS\\fR]" + (" \\fISUBCOMMAND\\fR ..." if "Subcommands:" in main_help else ""),
            ".SH DESCRIPTION", ".nf", roff_text(main_help), ".fi"]
    commands = []
    if "Subcommands:" in main_help:
        block = main_help.split("Subcommands:", 1)[1]
        for line in block.split("\n")[1:]:
            m = re.match(r"^  (\S+)\s", line)
            if m:
                commands.append(m.group(1))
            elif line.strip() == "" and commands:
                break
    if commands:
        page.append(".SH COMMANDS")
        for cmd in commands:
            page += [".SS " + cmd, ".nf", roff_text(run_help([binary, cmd])), ".fi"]
    extra = os.path.join(os.path.dirname(os.path.abspath(__file__)), "man", f"{name}.{section}.in")
    if os.path.exists(extra):
        with open(extra) as f:
            page.append(f.read().rstrip("\n"))
    page += [".SH SEE ALSO", "torchx(1), torchxd(8); the README and docs/ of torchxd, installed in",
             "/usr/share/doc/torchxd/"]
    with open(output, "w") as f:
        f.write("\n".join(page) + "\n")


if __name__ == "__main__":
    main()
