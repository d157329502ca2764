"""The whole-download research path at small scale: the synthetic download, its columnar form
(conversion, rerun, resume), scoring from it, the delay table and spikes, bad input."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import shutil
import zipfile
from itertools import islice
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from crowdnotes_site.lib.communitynotes.data import columnar
from crowdnotes_site.lib.communitynotes.data import files as download_file
from crowdnotes_site.lib.communitynotes.data import scorer_input as scoring_tsv
from crowdnotes_site.lib.communitynotes.data import synthetic_download as synth
from crowdnotes_site.lib.communitynotes.data import tsv as cio
from crowdnotes_site.lib.communitynotes.research import delays
from crowdnotes_site.lib.communitynotes.research import run as research

SCALE = 0.002  # ~400 K ratings, ~5 K notes


@pytest.fixture(scope="module")
def download(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("download")
    synth.generate(folder, scale=SCALE, seed=3)
    return folder


@pytest.fixture(scope="module")
def researched(download: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    folder = tmp_path_factory.mktemp("researched")
    for f in download.iterdir():
        shutil.copy2(f, folder / f.name)
    results = research.run(folder, say=lambda _m: None)
    return folder, results


def _copy(download: Path, tmp_path: Path) -> Path:
    folder = tmp_path / "dl"
    folder.mkdir(parents=True)
    for f in download.iterdir():
        if f.is_file():
            shutil.copy2(f, folder / f.name)
    return folder


def _digest(folder: Path) -> str:
    h = hashlib.sha256()
    for f in sorted(folder.glob("*.tsv")):
        h.update(f.name.encode())
        h.update(f.read_bytes())
    return h.hexdigest()


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh, delimiter="\t", quoting=csv.QUOTE_NONE))


# ---------------------------------------------------------------- generator


def test_generator_writes_the_download_layout_in_todays_schema(download: Path) -> None:
    names = sorted(f.name for f in download.glob("*.tsv"))
    assert names == [
        "noteRequests-00000.tsv", "noteStatusHistory-00000.tsv", "notes-00000.tsv",
        *[f"ratings-{k:05d}.tsv" for k in range(8)], "userEnrollment-00000.tsv",
    ]  # fmt: skip
    truth = json.loads((download / "synthetic-truth.json").read_text())
    notes = _rows(download / "notes-00000.tsv")
    assert list(notes[0]) == list(synth.NOTE_COLUMNS)
    assert len(notes) == truth["notes"] == round(synth.FULL["notes"] * SCALE)
    history = _rows(download / "noteStatusHistory-00000.tsv")
    assert len(history) == truth["status_history_rows"] == round(synth.FULL["status_history"] * SCALE)
    assert len(_rows(download / "userEnrollment-00000.tsv")) == round(synth.FULL["enrollment"] * SCALE)
    assert len(_rows(download / "noteRequests-00000.tsv")) == round(synth.FULL["note_requests"] * SCALE)
    per_note: dict[str, int] = {}
    n_ratings = 0
    for k in range(8):
        rows = _rows(download / f"ratings-{k:05d}.tsv")
        assert list(rows[0]) == list(synth.RATING_COLUMNS)
        assert {r["helpfulnessLevel"] for r in rows} == {"HELPFUL", "SOMEWHAT_HELPFUL", "NOT_HELPFUL"}
        n_ratings += len(rows)
        for r in rows:
            per_note[r["noteId"]] = per_note.get(r["noteId"], 0) + 1
    assert n_ratings == truth["ratings_written"]
    # Within 10 % of the full shape's ratings at this scale, heavy-tailed: most notes under 20.
    assert abs(n_ratings - synth.FULL["ratings"] * SCALE) < 0.1 * synth.FULL["ratings"] * SCALE
    counts = np.array(list(per_note.values()))
    assert np.median(counts) < 20 and counts.max() > 20 * np.median(counts)


def test_generator_is_deterministic_from_its_seed(download: Path, tmp_path: Path) -> None:
    synth.generate(tmp_path / "same", scale=SCALE, seed=3)
    synth.generate(tmp_path / "other", scale=SCALE, seed=4)
    assert _digest(tmp_path / "same") == _digest(download)
    assert _digest(tmp_path / "other") != _digest(download)


def test_generator_zip_writes_xs_zips_holding_the_same_tsvs(download: Path, tmp_path: Path) -> None:
    tiny = 0.0002
    synth.main([str(tmp_path / "tsv"), "--scale", str(tiny), "--seed", "5"])
    synth.main([str(tmp_path / "zip"), "--scale", str(tiny), "--seed", "5", "--zip"])
    tsvs = sorted((tmp_path / "tsv").glob("*.tsv"))
    zips = sorted((tmp_path / "zip").iterdir())
    # Only zips (and the truth files) are left: no TSV or part file on disk.
    assert [f.name for f in zips] == sorted(
        [f"{f.stem}.zip" for f in tsvs] + ["synthetic-kind.npy", "synthetic-truth.json"]
    )
    for f in tsvs:
        with zipfile.ZipFile(tmp_path / "zip" / f"{f.stem}.zip") as zf:
            (info,) = zf.infolist()  # one member: the TSV of the zip's name, deflated
            assert info.filename == f.name and info.compress_type == zipfile.ZIP_DEFLATED
            assert zf.read(info) == f.read_bytes() and info.compress_size < info.file_size
    assert np.array_equal(
        np.load(tmp_path / "zip" / "synthetic-kind.npy"), np.load(tmp_path / "tsv" / "synthetic-kind.npy")
    )


# ---------------------------------------------------------------- scoring from the columnar form


def test_scoring_from_columnar_equals_score_communitynotes_on_the_tsvs(
    researched: tuple[Path, dict], tmp_path: Path
) -> None:
    folder, results = researched
    ratings = tmp_path / "ratings"
    ratings.mkdir()
    for f in folder.glob("ratings-*.tsv"):
        (ratings / f.name).symlink_to(f)
    summary = scoring_tsv.score_files(
        notes_path=folder / "notes-00000.tsv",
        ratings_path=ratings,
        status_history_path=folder / "noteStatusHistory-00000.tsv",
        outdir=tmp_path / "tsv",
    )
    for name in ("scored_notes.tsv", "helpfulness_scores.tsv"):
        assert (folder / "research" / name).read_text() == (tmp_path / "tsv" / name).read_text()
    assert results["score"]["dropped"] == summary["dropped"]
    truth = json.loads((folder / "synthetic-truth.json").read_text())
    assert summary["dropped"]["rating of a deleted note"] == truth["ratings_of_unknown_notes"]  # type: ignore[index]


def test_rater_numbering_does_not_depend_on_how_blocks_are_gathered(
    researched: tuple[Path, dict], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The loader looks rater ids up per span of blocks; spans of one block and one span for the
    whole file must number every rater the same (the order of first appearance)."""
    folder, _results = researched
    whole = columnar.load(folder / "columnar")
    monkeypatch.setattr(scoring_tsv._RaterSpans, "SPAN", 1)  # every block its own span
    per_block = columnar.load(folder / "columnar")
    assert len(whole.participant_ids) > 100
    assert per_block.participant_ids == whole.participant_ids
    assert np.array_equal(per_block.ratings.rater, whole.ratings.rater)
    assert np.array_equal(per_block.ratings.note, whole.ratings.note)


def test_planted_note_kinds_get_their_statuses(researched: tuple[Path, dict]) -> None:
    folder, _ = researched
    note_id, kind, n_ratings = np.load(folder / "synthetic-kind.npy")
    planted = {int(n): (int(k), int(c)) for n, k, c in zip(note_id, kind, n_ratings, strict=True)}
    hits: dict[int, list[bool]] = {0: [], 1: [], 2: []}
    expected = {0: "CURRENTLY_RATED_HELPFUL", 1: "NEEDS_MORE_RATINGS", 2: "CURRENTLY_RATED_NOT_HELPFUL"}
    for row in _rows(folder / "research" / "scored_notes.tsv"):
        k, c = planted[int(row["noteId"])]
        if c >= 40:
            hits[k].append(row["coreRatingStatus"] == expected[k])
    for k, got in hits.items():
        assert len(got) >= 20 and np.mean(got) > 0.7, (synth.NOTE_KINDS[k], np.mean(got), len(got))


# ---------------------------------------------------------------- delays and spikes


def test_delay_table_equals_the_row_by_row_computation_on_the_tsvs(researched: tuple[Path, dict]) -> None:
    folder, _ = researched
    table = json.loads((folder / "research" / "delays.json").read_text())
    notes = [(r.note_id, r.created_at_ms, r.tweet_id) for r in cio.read_note_times(folder / "notes-00000.tsv")]  # type: ignore[union-attr]
    history = list(cio.read_status_history(folder / "noteStatusHistory-00000.tsv"))
    report = delays.delays_from_rows(notes, [(h.note_id, h.created_at_ms, h.first_non_nmr_ms) for h in history])  # type: ignore[union-attr]
    assert table["post_to_first_note_hours"] == pytest.approx(report.post_to_first_note_hours.as_dict())
    assert table["note_to_first_verdict_hours"] == pytest.approx(report.note_to_first_verdict_hours.as_dict())
    assert table["never_left_nmr_share"] == pytest.approx(report.never_left_nmr_share)
    # note -> first Helpful, by hand from the status-history file (created is always set here).
    helpful = [
        (int(r["timestampMillisOfFirstNonNMRStatus"]) - int(r["createdAtMillis"])) / 3_600_000
        for r in _rows(folder / "noteStatusHistory-00000.tsv")
        if r["firstNonNMRStatus"] == "CURRENTLY_RATED_HELPFUL"
    ]
    assert table["note_to_first_helpful_hours"]["p50"] == pytest.approx(float(np.median(helpful)))
    assert table["note_to_first_helpful_hours"]["n"] == len(helpful)
    # The planted verdict delay (log-normal, median 30 h) is what the table finds.
    assert table["note_to_first_verdict_hours"]["p50"] == pytest.approx(synth.VERDICT_DELAY_MEDIAN_H, rel=0.15)
    months = [r["month"] for r in table["by_month"]]
    assert months == sorted(months) and sum(r["notes"] for r in table["by_month"]) == table["notes"]


def test_planted_spike_days_are_found_with_their_word(researched: tuple[Path, dict]) -> None:
    folder, _ = researched
    truth = json.loads((folder / "synthetic-truth.json").read_text())
    found = {s["day"]: s for s in json.loads((folder / "research" / "spikes.json").read_text())["spikes"]}
    daily = _rows(folder / "research" / "spikes_daily.tsv")
    assert sum(int(r["notes"]) for r in daily) == truth["notes"]
    # A planted day's notes are spread over it and the next (post -> note delay): the spike is
    # the day itself or the day after.
    for day, word in zip(truth["spike_days"], truth["spike_words"], strict=True):
        next_day = str(np.datetime64(day) + 1)
        hit = found.get(day) or found.get(next_day)
        assert hit is not None, (day, sorted(found))
        assert word in [t[0] for t in hit["terms"]]


# ---------------------------------------------------------------- rerun, resume


def test_rerun_converts_only_changed_shards_and_rescoring_sees_the_change(download: Path, tmp_path: Path) -> None:
    folder = _copy(download, tmp_path)
    research.run(folder, say=lambda _m: None)
    again = research.run(folder, say=lambda _m: None)
    assert again["convert"]["files_converted"] == 0 and again["convert"]["files_kept"] == 12
    assert again["score"]["dropped"]["duplicate rating"] == 0
    shard = folder / "ratings-00003.tsv"
    with shard.open("rb") as fh:
        fh.readline()
        row = fh.readline()
    with shard.open("ab") as fh:  # the same rating twice: the reference keeps the last
        fh.write(row)
    third = research.run(folder, say=lambda _m: None)
    assert third["convert"]["files_converted"] == 1
    assert third["score"]["dropped"]["duplicate rating"] == 1
    assert third["score"]["inputs"] != again["score"]["inputs"]


def test_killed_conversion_leaves_nothing_half_written_and_resumes(
    download: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = _copy(download, tmp_path)
    real = columnar._convert_ratings
    calls = []

    def dies_on_the_third(source: Path, tmp: Path, progress):  # type: ignore[no-untyped-def]
        calls.append(source.name)
        if len(calls) == 3:
            real(source, tmp, progress)  # the part file is written, then the process "dies"
            raise KeyboardInterrupt
        return real(source, tmp, progress)

    monkeypatch.setattr(columnar, "_convert_ratings", dies_on_the_third)
    with pytest.raises(KeyboardInterrupt):
        research.run(folder, say=lambda _m: None)
    col = folder / "columnar"
    assert not (col / "ratings-00002.parquet").exists() and not (col / "ratings-00002.parquet.json").exists()
    assert (col / "ratings-00001.parquet.json").exists()
    monkeypatch.setattr(columnar, "_convert_ratings", real)
    resumed = research.run(folder, say=lambda _m: None)
    assert resumed["convert"]["files_kept"] == 4  # notes, status history, ratings 0 and 1
    assert resumed["convert"]["files_converted"] == 8
    assert not list(col.glob("*.part"))
    assert (
        resumed["score"]["ratings_read"] == json.loads((folder / "synthetic-truth.json").read_text())["ratings_written"]
    )


# ---------------------------------------------------------------- X's zips


def _zip_copy(download: Path, to: Path, edit: dict[str, bytes] | None = None) -> Path:
    """The download as X publishes it (each TSV in a zip of its name, under a folder path), with
    `edit`'s TSVs replaced."""
    to.mkdir(parents=True)
    for f in download.glob("*.tsv"):
        with zipfile.ZipFile(to / f"{f.stem}.zip", "w", zipfile.ZIP_DEFLATED, compresslevel=1) as zf:
            zf.writestr(f"2025/06/16/{f.stem}/{f.name}", (edit or {}).get(f.name) or f.read_bytes())
    return to


def _parquet(folder: Path) -> dict[str, pa.Table]:
    return {p.name: pq.read_table(p) for p in sorted((folder / "columnar").glob("*.parquet"))}


def test_a_zipped_folder_converts_to_the_parquet_of_its_tsvs_and_reruns_only_a_changed_zip(
    researched: tuple[Path, dict], download: Path, tmp_path: Path
) -> None:
    tsv_folder, tsv_results = researched
    folder = _zip_copy(download, tmp_path / "zipped")
    results = research.run(folder, say=lambda _m: None)
    assert results["convert"]["files_converted"] == 12
    by_tsv, by_zip = _parquet(tsv_folder), _parquet(folder)
    assert list(by_zip) == list(by_tsv) and len(by_zip) == 12
    for name, table in by_tsv.items():
        assert by_zip[name].equals(table), name
    for name in ("scored_notes.tsv", "helpfulness_scores.tsv", "delays.json", "spikes.json"):
        assert (folder / "research" / name).read_bytes() == (tsv_folder / "research" / name).read_bytes(), name
    assert results["score"]["dropped"] == tsv_results["score"]["dropped"]
    # A rerun reads only what changed: nothing, then the one zip fetched again with a new row.
    again = research.run(folder, say=lambda _m: None)
    assert again["convert"]["files_converted"] == 0 and again["convert"]["files_kept"] == 12
    data = (download / "ratings-00003.tsv").read_bytes()
    row = data.split(b"\n")[1] + b"\n"
    with zipfile.ZipFile(folder / "ratings-00003.zip", "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("ratings-00003.tsv", data + row)  # the same rating twice: the later one is kept
    third = research.run(folder, say=lambda _m: None)
    assert third["convert"]["files_converted"] == 1 and third["convert"]["files_kept"] == 11
    assert third["score"]["dropped"]["duplicate rating"] == 1


def test_a_zip_read_line_by_line_from_mid_file_gives_the_parquet_of_its_tsv(download: Path, tmp_path: Path) -> None:
    """A block the numpy parse cannot take (here a non-ASCII byte, past the first block) sends
    the rest of the file line by line from that block's start: a zip's member is opened again
    and read up to it (it cannot seek back)."""
    data = (download / "ratings-00006.tsv").read_bytes()
    assert len(data) > (8 << 20) + 1000  # the edit below falls in the second block of 8 MB
    cut = data.rindex(b"\n", 0, len(data) - 1000) + 1
    edited = data[:cut] + data[cut:].replace(b"\t", "\u00e9\t".encode(), 1)  # a non-ASCII rater id
    tsvs = _copy(download, tmp_path / "tsv")
    (tsvs / "ratings-00006.tsv").write_bytes(edited)
    zips = _zip_copy(download, tmp_path / "zip", {"ratings-00006.tsv": edited})
    by_tsv = research.run(tsvs, say=lambda _m: None, only=("convert",))
    by_zip = research.run(zips, say=lambda _m: None, only=("convert",))
    assert by_tsv["convert"]["skipped_rows"] == {"ratings-00006.tsv: bad noteId": 1}
    assert by_zip["convert"]["skipped_rows"] == {"ratings-00006.zip: bad noteId": 1}  # the file as found
    tables = _parquet(zips)["ratings-00006.parquet"], _parquet(tsvs)["ratings-00006.parquet"]
    assert tables[0].equals(tables[1]) and tables[0].num_rows == data.count(b"\n") - 2  # header, the bad row


@pytest.mark.parametrize(
    ("member", "accepted"),
    [
        ("ratings-00003.tsv", True),
        ("2025/06/16/ratings-00003/ratings-00003.tsv", True),  # X's zips: under a dated folder path
        ("../ratings-00003.tsv", False),
        ("../x.tsv", False),
        ("2025/../ratings-00003.tsv", False),
        ("./ratings-00003.tsv", False),
        ("/ratings-00003.tsv", False),
        ("2025//ratings-00003.tsv", False),
        ("2025\\ratings-00003.tsv", False),
        ("ratings-00004.tsv", False),
        ("ratings-00003/x.tsv", False),
    ],
)
def test_a_zip_member_is_read_only_under_its_expected_name(member: str, accepted: bool, tmp_path: Path) -> None:
    path = tmp_path / "ratings-00003.zip"
    data = b"noteId\traterParticipantId\n"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(member, data)
    if accepted:
        assert download_file.data_size(path) == len(data)
        with download_file.open_data(path) as fh:
            assert fh.read() == data
        return
    refused = f"{path}: the zip holds {member}, not ratings-00003.tsv"
    with pytest.raises(download_file.DownloadError) as size_error:
        download_file.data_size(path)
    with pytest.raises(download_file.DownloadError) as open_error, download_file.open_data(path):
        pass
    assert str(size_error.value).startswith(refused) and str(open_error.value).startswith(refused)


def test_bad_zips_are_refused_by_the_convert_naming_the_zip(download: Path, tmp_path: Path) -> None:
    data = (download / "ratings-00005.tsv").read_bytes()
    folder = _zip_copy(download, tmp_path / "cut", {"ratings-00005.tsv": data[: len(data) - 40]})
    lines = data.count(b"\n")
    with pytest.raises(columnar.DownloadError, match=rf"ratings-00005\.zip:{lines}: the file ends inside a row"):
        research.run(folder, say=lambda _m: None)
    assert not list((folder / "columnar").glob("*.parquet"))  # checked before anything converts
    shard = folder / "ratings-00002.zip"
    good = shard.read_bytes()
    shard.write_bytes(good[: len(good) - 100])
    with pytest.raises(columnar.DownloadError, match=r"ratings-00002\.zip: not a readable zip"):
        research.run(folder, say=lambda _m: None)
    (folder / "ratings-00002.tsv").write_bytes(data)
    with pytest.raises(columnar.DownloadError, match=r"ratings-00002\.tsv and ratings-00002\.zip are the same file"):
        research.run(folder, say=lambda _m: None)


# ---------------------------------------------------------------- bad input


def _ratings_header(folder: Path) -> str:
    return (folder / "ratings-00000.tsv").open().readline()


def test_truncated_shard_is_refused_naming_file_and_line_and_resumes_after_the_fix(
    download: Path, tmp_path: Path
) -> None:
    folder = _copy(download, tmp_path)
    shard = folder / "ratings-00005.tsv"
    good = shard.read_bytes()
    shard.write_bytes(good[: len(good) - 40])  # cut inside the last row
    lines = good.count(b"\n")
    with pytest.raises(columnar.DownloadError, match=rf"ratings-00005\.tsv:{lines}: the file ends inside a row"):
        research.run(folder, say=lambda _m: None)
    assert not list((folder / "columnar").glob("*.parquet"))  # checked before anything converts
    shard.write_bytes(good)
    assert research.run(folder, say=lambda _m: None)["convert"]["files_converted"] == 12


def test_another_years_schema_is_refused_naming_the_file(download: Path, tmp_path: Path) -> None:
    folder = _copy(download, tmp_path)
    shard = folder / "ratings-00002.tsv"
    text = shard.read_text().split("\n", 1)[1]
    old_header = "noteId\tparticipantId\tcreatedAtMillis\tagree\tdisagree\thelpful\tnotHelpful\n"
    shard.write_text(old_header + text)
    with pytest.raises(
        columnar.DownloadError, match=r"ratings-00002\.tsv:1: the header lacks raterParticipantId, helpfulnessLevel"
    ):
        research.run(folder, say=lambda _m: None)
    assert research.main([str(folder)]) == 2


def test_unknown_extra_column_is_read_and_reported(download: Path, tmp_path: Path) -> None:
    folder = _copy(download, tmp_path)
    shard = folder / "ratings-00001.tsv"
    lines = shard.read_text().splitlines()
    shard.write_text("\n".join([lines[0] + "\tnewColumn2027"] + [line + "\tx" for line in lines[1:]]) + "\n")
    results = research.run(folder, say=lambda _m: None)
    assert results["convert"]["unknown_columns"] == {"ratings-00001.tsv": ["newColumn2027"]}
    ref = research.run(_copy(download, tmp_path / "ref"), say=lambda _m: None)
    assert results["score"]["helpful"] == ref["score"]["helpful"]
    assert results["score"]["ratings_scored"] == ref["score"]["ratings_scored"]


def test_a_bad_row_is_a_counted_skip_with_its_line(download: Path, tmp_path: Path) -> None:
    folder = _copy(download, tmp_path)
    shard = folder / "ratings-00004.tsv"
    lines = shard.read_text().splitlines()
    lines[10] = lines[10].replace("HELPFUL", "VERY_HELPFUL", 1)
    shard.write_text("\n".join(lines) + "\n")
    results = research.run(folder, say=lambda _m: None, only=("convert",))
    skipped = results["convert"]["skipped_rows"]
    assert sum(skipped.values()) == 1 and next(iter(skipped)).startswith("ratings-00004.tsv: ")
    manifest = json.loads((folder / "columnar" / "ratings-00004.parquet.json").read_text())
    assert manifest["examples"][0].endswith(f"ratings-00004.tsv:11: {next(iter(manifest['skipped']))}")


def test_a_folder_without_notes_file_is_refused(download: Path, tmp_path: Path) -> None:
    folder = _copy(download, tmp_path)
    (folder / "notes-00000.tsv").unlink()
    with pytest.raises(columnar.DownloadError, match="no notes-"):
        research.run(folder, say=lambda _m: None)


@pytest.mark.parametrize("piece_bytes", [1, 7, 64, 1 << 20])
def test_line_blocks_give_the_lines_iterating_the_file_gives(piece_bytes: int) -> None:
    rng = np.random.default_rng(piece_bytes)
    for last_newline in (True, False):
        lines = [b"x" * int(n) + b"\tend\n" for n in rng.integers(0, 20, 101)] + [b"\n", b"\r\n"]
        data = b"".join(lines) if last_newline else b"".join(lines) + b"no newline at the end"
        for n_lines in (1, 2, 10, 500):
            fh = io.BytesIO(data)
            expected = [(len(c), b"".join(c)) for c in iter(lambda: list(islice(fh, n_lines)), [])]  # noqa: B023
            assert list(download_file.line_blocks(io.BytesIO(data), n_lines, piece_bytes)) == expected
    assert list(download_file.line_blocks(io.BytesIO(b""), 3, piece_bytes)) == []
