from __future__ import annotations

from notes.analytics import charts


def test_bar_chart_escapes_text_and_draws_one_bar_per_known_value() -> None:
    svg = charts.bar_chart(
        "<script>x</script> delays",
        ["median", "p90 & more"],
        [charts.Series("a", [1.5, None]), charts.Series("b", [3.0, 40.0])],
        unit=" h",
    )
    assert "<script>" not in svg and "&lt;script&gt;" in svg and "p90 &amp; more" in svg
    assert svg.count('height="12"') == 3 and "no data" in svg  # 3 bars; the None value is labelled
    assert 'role="img"' in svg and "<title" in svg and "40 h" in svg and "1.5 h" in svg


def test_time_series_marks_the_given_points_and_breaks_undefined_reference_lines() -> None:
    svg = charts.time_series_chart(
        "Notes per day",
        [f"d{i}" for i in range(10)],
        [1, 2, 3, 2, 1, 9, 2, 1, 2, 3],
        lines=[charts.Series("mean", [None, None, 2, 2, 2, 2, 2, 2, 2, 2])],
        marked=[5],
    )
    assert svg.count('fill="#c53030"') == 1 and "spike d5: 9" in svg
    assert svg.count("<polyline") == 2  # the series and one unbroken segment of the mean


def test_counts_print_as_integers_and_long_labels_fit_the_svg() -> None:
    import re

    label = "Drugs, vaccines, treatments and tests"
    svg = charts.bar_chart("Posts by health topic", [label, "Not health"], [charts.Series("posts", [13.0, 1.0])])
    assert ">13<" in svg and ">1<" in svg and "13.0" not in svg
    # The label is right-aligned at x; even at the widest character advance it starts inside the SVG.
    anchor = re.search(r'<text x="([\d.]+)"[^>]*text-anchor="end"[^>]*>' + re.escape(label), svg)
    assert anchor is not None
    x = float(anchor.group(1))
    assert x - charts.CHAR_W * len(label) >= 0
    view_box = re.search(r'viewBox="0 0 ([\d.]+) ', svg)
    assert view_box is not None
    width = float(view_box.group(1))
    bar_end = max(
        float(a) + float(b) for a, b in re.findall(r'<rect x="([\d.]+)" y="[\d.]+" width="([\d.]+)" height', svg)
    )
    assert bar_end <= width
