#!/usr/bin/env python3
"""Writes a man page (roff) from a program's own --help: the main help, then
each subcommand's `PROG CMD --help` (CLI11's "Subcommands:" list), so the
page says exactly what the binary says.

    gen_man.py BINARY NAME SECTION OUTPUT "one-line description"
"""
import re
import subprocess
import sys


def run_help(argv):
    done = subprocess.run(argv + ["--help"], capture_output=True, text=True, timeout=30)
    return done.stdout


def roff_text(text):
    out = []
    for line in text.rstrip("\n").split("\n"):
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
    page += [".SH SEE ALSO", "torchx(1), torchxd(8); /usr/share/doc/torchxd/"]
    with open(output, "w") as f:
        f.write("\n".join(page) + "\n")


if __name__ == "__main__":
    main()
