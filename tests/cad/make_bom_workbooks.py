"""Writes tests/cad/bodies-kicad9-bom.xls and .ods: bodies-kicad9-bom.xlsx (make_bom_kicad9.py) saved by LibreOffice
Calc as Excel 97's workbook and as OpenDocument's, the older and the open formats an ERP or an office suite writes a
BOM in; and bodies-kicad9-bom-locked.xlsx, the same workbook encrypted with a password ("plant-secret", Office's
agile encryption) by msoffcrypto-tool, as Excel's "Encrypt with Password" saves it.

Not run by the tests: LibreOffice and msoffcrypto-tool are not dependencies of the product. Regenerate with
LibreOffice Calc installed (Debian 12: libreoffice-calc-nogui) and `pip install msoffcrypto-tool`:
    python3 tests/cad/make_bom_workbooks.py
"""
import io
import subprocess
from pathlib import Path

from msoffcrypto.format.ooxml import OOXMLFile

HERE = Path(__file__).parent

with (HERE / "bodies-kicad9-bom.xlsx").open("rb") as plain:
    locked = io.BytesIO()
    OOXMLFile(plain).encrypt("plant-secret", locked)
(HERE / "bodies-kicad9-bom-locked.xlsx").write_bytes(locked.getvalue())

for target in ('xls:"MS Excel 97"', "ods"):
    subprocess.run(["soffice", "--headless", "--convert-to", target.replace('"', ""), "--outdir", str(HERE),
                    str(HERE / "bodies-kicad9-bom.xlsx")], check=True, capture_output=True)
