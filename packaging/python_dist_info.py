#!/usr/bin/env python3
"""Writes the dist-info directory pip would write for python/ (METADATA and
entry_points.txt from python/pyproject.toml), so that TorchX 0.7, which finds
schedulers through installed distributions' entry points, finds torchxd's
where the .deb installs the package without pip.

    python_dist_info.py PYPROJECT OUT_DIR     (writes OUT_DIR/torchxd-VERSION.dist-info)
"""
import os
import re
import sys


def main():
    pyproject, out = sys.argv[1], sys.argv[2]
    with open(pyproject) as f:
        text = f.read()
    version = re.search(r'^version = "([^"]+)"', text, re.M).group(1)
    groups = []
    for name, body in re.findall(r'^\[project\.entry-points\."([^"]+)"\]\n(.*?)(?=^\[|\Z)', text, re.M | re.S):
        entries = [line.replace('"', "").strip() for line in body.splitlines()
                   if line.strip() and not line.strip().startswith("#")]
        groups.append(f"[{name}]\n" + "\n".join(entries) + "\n")
    dist = os.path.join(out, f"torchxd-{version}.dist-info")
    os.makedirs(dist, exist_ok=True)
    with open(os.path.join(dist, "METADATA"), "w") as f:
        f.write(f"Metadata-Version: 2.1\nName: torchxd\nVersion: {version}\n")
    with open(os.path.join(dist, "entry_points.txt"), "w") as f:
        f.write("\n".join(groups))
    with open(os.path.join(dist, "INSTALLER"), "w") as f:
        f.write("torchxd .deb\n")


if __name__ == "__main__":
    main()
