"""Build DVC's offline plots page template, ``.dvc/plots/offline.html``.

DVC's default plots page loads Vega, Vega-Lite and vega-embed from a CDN, so it is blank
without a network. This script inlines the three libraries' built, minified files (from the
npm packages) into an HTML template that ``.dvc/config`` names as ``plots.html_template``,
and copies their licences to ``.dvc/plots/vendor/``. Run it only to change versions
(needs the npm registry):

    mkdir -p /tmp/vega && cd /tmp/vega && npm pack vega@5.33.1 vega-lite@5.23.0 vega-embed@6.29.0
    for t in *.tgz; do mkdir -p "${t%.tgz}" && tar xzf "$t" -C "${t%.tgz}"; done
    python scripts/vendor_vega.py /tmp/vega

The template keeps DVC's placeholders ``{refresh_tag}`` and ``{plot_divs}`` and has no
``{scripts}`` placeholder, so DVC's CDN ``<script src=...>`` tags are left out.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / ".dvc" / "plots"
PACKAGES = [("vega", "build/vega.min.js"), ("vega-lite", "build/vega-lite.min.js"),
            ("vega-embed", "build/vega-embed.min.js")]
# vega's npm package ships no LICENSE file; its package.json says BSD-3-Clause and the
# vega repository's LICENSE is the same BSD-3-Clause text as vega-lite's (same copyright holder).
LICENSE_FALLBACK = {"vega": "vega-lite"}

HEAD = """<!DOCTYPE html>
<html>
<head>
    <meta charset="utf-8">
    {refresh_tag}
    <title>contrastlab: DVC plots</title>
    <!-- Offline: Vega, Vega-Lite and vega-embed are inlined below (BSD-3-Clause; licences in
         .dvc/plots/vendor/). Built by scripts/vendor_vega.py; do not edit by hand. -->
"""
TAIL = """    <style>
        body { font-family: sans-serif; margin: 16px; }
        table { border-spacing: 15px; }
        .vega-embed { width: 95%; }
    </style>
</head>
<body>
    {plot_divs}
</body>
</html>
"""


def main(src: Path) -> int:
    if not src.is_dir():
        print(f"error: {src}: not a folder (give the folder of unpacked npm packages)",
              file=sys.stderr)
        return 2
    pkg_dirs = {name: next(src.glob(f"{name}-[0-9]*/package"), None) for name, _ in PACKAGES}
    missing = [name for name, d in pkg_dirs.items() if d is None]
    if missing:
        print(f"error: {src}: no unpacked package {', '.join(missing)} (<name>-<version>/package)",
              file=sys.stderr)
        return 2
    vendor = OUT / "vendor"
    vendor.mkdir(parents=True, exist_ok=True)
    parts, versions = [HEAD], {}
    for name, rel in PACKAGES:
        pkg = pkg_dirs[name]
        meta = json.loads((pkg / "package.json").read_text())
        js = (pkg / rel).read_text(encoding="utf-8")
        js = re.sub(r"\n?//# sourceMappingURL=\S+\s*$", "", js)  # no map to fetch offline
        if "</script" in js.lower():
            raise ValueError(f"{name}: the built file contains '</script', cannot inline it")
        versions[name] = {"version": meta["version"], "license": meta["license"], "file": rel,
                          "sha256_inlined": hashlib.sha256(js.encode()).hexdigest()}
        lic = pkg / "LICENSE"
        if not lic.exists():
            lic = pkg_dirs[LICENSE_FALLBACK[name]] / "LICENSE"
        (vendor / f"LICENSE-{name}").write_text(lic.read_text(encoding="utf-8"))
        parts.append(f"    <!-- {name} {meta['version']} ({meta['license']}), {rel} -->\n"
                     f"    <script type=\"text/javascript\">{js}</script>\n")
    parts.append(TAIL)
    (OUT / "offline.html").write_text("".join(parts), encoding="utf-8")
    (vendor / "VERSIONS.json").write_text(json.dumps(versions, indent=2) + "\n")
    print(f"wrote {OUT / 'offline.html'}: " + ", ".join(f"{k} {v['version']}"
                                                       for k, v in versions.items()))
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print(f"error: usage: python scripts/vendor_vega.py FOLDER ({len(sys.argv) - 1} "
              "arguments given)", file=sys.stderr)
        sys.exit(2)
    sys.exit(main(Path(sys.argv[1])))
