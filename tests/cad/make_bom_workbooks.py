"""Writes tests/cad/bodies-kicad9-bom.xls and .ods: bodies-kicad9-bom.xlsx (make_bom_kicad9.py) saved by LibreOffice
Calc as Excel 97's workbook and as OpenDocument's, the older and the open formats an ERP or an office suite writes a
BOM in.

Not run by the tests: LibreOffice is not a dependency of the product. Regenerate with LibreOffice Calc installed
(Debian 12: libreoffice-calc-nogui):
    python3 tests/cad/make_bom_workbooks.py
"""
import subprocess
from pathlib import Path

HERE = Path(__file__).parent

for target in ('xls:"MS Excel 97"', "ods"):
    subprocess.run(["soffice", "--headless", "--convert-to", target.replace('"', ""), "--outdir", str(HERE),
                    str(HERE / "bodies-kicad9-bom.xlsx")], check=True, capture_output=True)
