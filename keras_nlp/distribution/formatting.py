"""Numbers as the plan's text and picture show them."""


def format_bytes(count):
    """`1536` -> `"1.50 KiB"`: binary units, two decimals (bytes whole)."""
    count = float(count)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(count) < 1024 or unit == "TiB":
            return (
                f"{count:.0f} {unit}" if unit == "B" else f"{count:.2f} {unit}"
            )
        count /= 1024
