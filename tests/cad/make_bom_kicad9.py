"""Writes tests/cad/bodies-kicad9.kicad_sch, the schematic of bodies-kicad9.kicad_pcb's parts (the KiCad library's
symbols, each with its value, footprint, manufacturer and part number; U3 marked do-not-populate, J2 left out of
the BOM, as a header soldered by hand is), and KiCad 9's BOMs of it:
- bodies-kicad9-bom.csv: `kicad-cli sch export bom` grouped by value, footprint and DNP, with the manufacturer's
  columns (grouped by value and footprint alone, KiCad 9 writes a group holding one DNP part as DNP, every part of
  it: a grouped BOM must group by ${DNP} too);
- bodies-kicad9-bom-flat.csv: KiCad's default BOM, a line per part (Refs, Value, Footprint, Qty, DNP);
- bodies-kicad9-bom.xlsx: the same parts in Altium's BOM columns (Comment, Description, Designator, Footprint,
  Quantity, Manufacturer 1, Manufacturer Part Number 1, Fitted) under a title block, packages by their purchasing
  names (`0603`, `SOT-23`), U3 and J2 Not Fitted, written as CSV here and saved as .xlsx by LibreOffice Calc (which
  reads `0603` as the number 603, as spreadsheets do).
The symbols are the KiCad library's (CC-BY-SA 4.0, whose exception leaves designs made with them free).

Not run by the tests: KiCad is not a dependency of the product. Regenerate with KiCad 9 and its symbol library
installed (Debian 12: bookworm-backports' kicad and kicad-symbols 9.0.8) and LibreOffice Calc (libreoffice-calc-nogui):
    python3 tests/cad/make_bom_kicad9.py
"""
import csv
import re
import subprocess
import tempfile
import uuid
from pathlib import Path

HERE = Path(__file__).parent
SYMBOLS = Path("/usr/share/kicad/symbols")
STEM = "bodies-kicad9"
ROOT = uuid.UUID(int=1)

# reference: (symbol, value, footprint, manufacturer, part number, dnp, in the BOM), as bodies-kicad9's PARTS
PARTS = {
    "R1": ("Device:R", "10k", "Resistor_SMD:R_0603_1608Metric", "Yageo", "RC0603FR-0710KL", False, True),
    "R2": ("Device:R", "10k", "Resistor_SMD:R_0603_1608Metric", "Yageo", "RC0603FR-0710KL", False, True),
    "C1": ("Device:C", "1uF", "Capacitor_SMD:C_0805_2012Metric", "Murata", "GRM21BR71C105KA01L", False, True),
    "C3": ("Device:C", "100nF", "Capacitor_SMD:C_0603_1608Metric", "Murata", "GRM188R71H104KA93D", False, True),
    "C2": ("Device:C_Polarized", "47uF", "Capacitor_SMD:CP_Elec_6.3x5.4", "Panasonic", "EEE-FK1C470P", False,
           True),
    "C4": ("Device:C_Polarized", "47uF", "Capacitor_SMD:CP_Elec_6.3x5.4", "Panasonic", "EEE-FK1C470P", False,
           True),
    "Q1": ("Transistor_BJT:Q_NPN_BEC", "MMBT3904", "Package_TO_SOT_SMD:SOT-23", "onsemi", "MMBT3904LT1G", False,
           True),
    "Q2": ("Transistor_BJT:Q_NPN_BEC", "MMBT3904", "Package_TO_SOT_SMD:SOT-23", "onsemi", "MMBT3904LT1G", False,
           True),
    "U1": ("Amplifier_Operational:LM2904", "LM358", "Package_SO:SOIC-8_3.9x4.9mm_P1.27mm", "Texas Instruments",
           "LM358DR", False, True),
    "U4": ("Amplifier_Operational:LM2904", "LM358", "Package_SO:SOIC-8_3.9x4.9mm_P1.27mm", "Texas Instruments",
           "LM358DR", False, True),
    "U3": ("Amplifier_Operational:LM2904", "OPA2333", "Package_SO:SOIC-8_3.9x4.9mm_P1.27mm", "Texas Instruments",
           "OPA2333AIDR", True, True),
    "U2": ("Regulator_Switching:TPS62130", "TPS62130", "Package_DFN_QFN:QFN-16-1EP_3x3mm_P0.5mm_EP1.75x1.75mm",
           "Texas Instruments", "TPS62130RGTR", False, True),
    "U5": ("Regulator_Switching:TPS62130", "TPS62130", "Package_DFN_QFN:QFN-16-1EP_3x3mm_P0.5mm_EP1.75x1.75mm",
           "Texas Instruments", "TPS62130RGTR", False, True),
    "D1": ("Device:LED", "red", "LED_THT:LED_D5.0mm", "Kingbright", "WP7113ID", False, True),
    "J1": ("Connector_Generic:Conn_01x04", "SM04B-SRSS-TB",
           "Connector_JST:JST_SH_SM04B-SRSS-TB_1x04-1MP_P1.00mm_Horizontal", "JST", "SM04B-SRSS-TB(LF)(SN)", False,
           True),
    "J2": ("Connector_Generic:Conn_01x04", "header", "Connector_PinHeader_2.54mm:PinHeader_1x04_P2.54mm_Vertical",
           "", "", False, False),
}


def library_symbol(lib_id: str) -> str:
    """The symbol's definition from the KiCad library, named as a schematic embeds it (`Device:R`)."""
    lib, name = lib_id.split(":")
    text = (SYMBOLS / f"{lib}.kicad_sym").read_text()
    start = re.search(rf'\n\t\(symbol "{re.escape(name)}"\n', text).start() + 2  # at its bracket
    depth, i = 0, start
    while True:
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        i += 1
        if depth == 0:
            break
    block = text[start:i]
    assert "(extends" not in block, f"{lib_id} extends another symbol: pick one that does not"
    return block.replace(f'(symbol "{name}"', f'(symbol "{lib_id}"', 1)


def prop(name: str, value: str, x: float, y: float, hide: bool) -> str:
    shown = " (hide yes)" if hide else ""
    return f'\t\t(property "{name}" "{value}" (at {x} {y} 0) (effects (font (size 1.27 1.27)){shown}))\n'


def placed(n: int, ref: str, spec: tuple) -> str:
    lib_id, value, footprint, maker, number, dnp, in_bom = spec
    x, y = 30 + 25 * (n % 6), 30 + 25 * (n // 6)
    return (f'\t(symbol (lib_id "{lib_id}") (at {x} {y} 0) (unit 1) (exclude_from_sim no) '
            f'(in_bom {"yes" if in_bom else "no"}) (on_board yes) (dnp {"yes" if dnp else "no"}) '
            f'(uuid "{uuid.UUID(int=100 + n)}")\n'
            + prop("Reference", ref, x + 3, y - 2, False) + prop("Value", value, x + 3, y + 2, False)
            + prop("Footprint", footprint, x, y, True) + prop("Datasheet", "", x, y, True)
            + prop("Description", "", x, y, True) + prop("Manufacturer", maker, x, y, True)
            + prop("MPN", number, x, y, True)
            + f'\t\t(instances (project "{STEM}" (path "/{ROOT}" (reference "{ref}") (unit 1))))\n\t)\n')


def main() -> None:
    symbols = "".join(library_symbol(s) + "\n" for s in sorted({spec[0] for spec in PARTS.values()}))
    sch = (f'(kicad_sch\n\t(version 20250114)\n\t(generator "eeschema")\n\t(generator_version "9.0")\n'
           f'\t(uuid "{ROOT}")\n\t(paper "A4")\n\t(lib_symbols\n{symbols}\t)\n'
           + "".join(placed(n, ref, spec) for n, ref in enumerate(PARTS, start=0) for spec in [PARTS[ref]])
           + '\t(sheet_instances (path "/" (page "1")))\n)\n')
    (HERE / f"{STEM}.kicad_sch").write_text(sch)
    fields = "Reference,Value,Footprint,${QUANTITY},${DNP},Manufacturer,MPN"
    labels = "Designator,Value,Footprint,Quantity,DNP,Manufacturer,Manufacturer Part Number"
    subprocess.run(["kicad-cli", "sch", "export", "bom", "--fields", fields, "--labels", labels, "--group-by",
                    "Value,Footprint,${DNP}", "-o", str(HERE / f"{STEM}-bom.csv"), str(HERE / f"{STEM}.kicad_sch")],
                   check=True, capture_output=True)
    subprocess.run(["kicad-cli", "sch", "export", "bom", "-o", str(HERE / f"{STEM}-bom-flat.csv"),
                    str(HERE / f"{STEM}.kicad_sch")], check=True, capture_output=True)
    altium()


# the purchasing names a BOM in Altium's columns gives the footprints
PURCHASING = {"R_0603_1608Metric": "0603", "C_0805_2012Metric": "0805", "C_0603_1608Metric": "0603",
              "CP_Elec_6.3x5.4": "CASE-D", "SOT-23": "SOT-23", "SOIC-8_3.9x4.9mm_P1.27mm": "SOIC-8",
              "QFN-16-1EP_3x3mm_P0.5mm_EP1.75x1.75mm": "VQFN-16", "LED_D5.0mm": "T-1 3/4",
              "JST_SH_SM04B-SRSS-TB_1x04-1MP_P1.00mm_Horizontal": "SM04B", "PinHeader_1x04_P2.54mm_Vertical": "HDR1X4"}


def altium() -> None:
    groups: dict[tuple, list[str]] = {}
    for ref, (_lib, value, footprint, maker, number, dnp, in_bom) in PARTS.items():
        fitted = not dnp and in_bom
        key = (value, PURCHASING[footprint.split(":")[1]], maker, number, fitted)
        groups.setdefault(key, []).append(ref)
    with tempfile.TemporaryDirectory() as tmp:
        table = Path(tmp) / f"{STEM}-bom.csv"
        with table.open("w", newline="") as f:
            w = csv.writer(f)
            w.writerows([["Bill of Materials"], [f"Project: {STEM}"], ["Variant: assembly A"], []])
            w.writerow(["Comment", "Description", "Designator", "Footprint", "Quantity", "Manufacturer 1",
                        "Manufacturer Part Number 1", "Fitted"])
            for (value, package, maker, number, fitted), refs in groups.items():
                w.writerow([value, "", ", ".join(refs), package, len(refs), maker, number,
                            "Fitted" if fitted else "Not Fitted"])
        subprocess.run(["soffice", "--headless", "--convert-to", "xlsx", "--outdir", str(HERE), str(table)],
                       check=True, capture_output=True)


if __name__ == "__main__":
    main()
