"""load_results checks the chain files of each cell against the directory's summary.json."""

import json
import warnings

import numpy as np
import pytest

import kameleon as km


def write_cell(directory, parts, chains, iterations=4):
    cell = directory.joinpath("chains", *parts)
    cell.mkdir(parents=True)
    for k in range(chains):
        np.save(cell / f"{k}.npy", np.full((iterations, 2), float(k)))
    return cell


# xtask writes `paper` only when true
PARAMS = {"quick": True, "seed": 7, "chains": 2}


def write_job(directory, name, params):
    """A chain's record in jobs/ (the fields load_results reads)."""
    (directory / "jobs").mkdir(exist_ok=True)
    (directory / "jobs" / f"{name}.json").write_text(json.dumps({"params": params}))


def write_summary(directory, cells):
    """A summary.json with the fields of xtask's that load_results reads."""
    summary = {
        "experiment": "kamh-banana",
        "params": PARAMS,
        "cells": [
            {
                "target": target,
                "target_label": target,
                "sampler": sampler,
                "setting": setting,
                "status": "done",
                "chains": chains,
                "iterations": iterations,
                "burn_in": 2,
                "wall_time_secs": 0.0,
                "metrics": {},
            }
            for target, sampler, setting, chains, iterations in cells
        ],
        "claims": [],
    }
    (directory / "summary.json").write_text(json.dumps(summary))


def test_the_chains_of_the_summarys_run_load_as_before(tmp_path):
    # a setting with characters xtask replaces in directory names
    write_cell(tmp_path, ("banana", "KAMH", "n=1000___=1"), 3)
    write_cell(tmp_path, ("banana", "AM-FS"), 2)
    write_summary(
        tmp_path,
        [("banana", "KAMH", "n=1000, ν=1", 3, 4), ("banana", "AM-FS", "", 2, 4)],
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        results = km.load_results(tmp_path)
    assert results[("banana", "KAMH", "n=1000___=1")].posterior["x"].shape == (3, 4, 2)
    assert results[("banana", "AM-FS", "")].posterior["x"].shape == (2, 4, 2)


def test_chain_files_of_an_earlier_run_with_more_chains_are_refused(tmp_path):
    # the earlier run wrote 0..4.npy, the summary's run 2 chains
    write_cell(tmp_path, ("banana", "KAMH", "n=1000"), 5)
    write_summary(tmp_path, [("banana", "KAMH", "n=1000", 2, 4)])
    stale = r"banana KAMH n=1000: .* holds 5 chain file\(s\).* records 2 chain"
    with pytest.raises(ValueError, match=stale):
        km.load_results(tmp_path)
    # without the summary, the files are read as they are
    (tmp_path / "summary.json").unlink()
    assert km.load_results(tmp_path)[("banana", "KAMH", "n=1000")].posterior["x"].shape[0] == 5


def test_missing_and_misnamed_chain_files_are_refused(tmp_path):
    cell = write_cell(tmp_path, ("banana", "KAMH"), 3)
    write_summary(tmp_path, [("banana", "KAMH", "", 3, 4)])
    (cell / "2.npy").rename(cell / "7.npy")
    with pytest.raises(ValueError, match=r"0.npy, 1.npy, 7.npy"):
        km.load_results(tmp_path)
    (cell / "7.npy").unlink()
    with pytest.raises(ValueError, match=r"holds 2 chain file\(s\).* records 3 chain"):
        km.load_results(tmp_path)


def test_chains_of_another_length_than_the_summarys_are_refused(tmp_path):
    write_cell(tmp_path, ("banana", "KAMH"), 2, iterations=6)
    write_summary(tmp_path, [("banana", "KAMH", "", 2, 4)])
    with pytest.raises(ValueError, match=r"\[6\] draws .* records 4 iterations"):
        km.load_results(tmp_path)


def test_a_cell_the_summary_does_not_record_is_read_with_a_warning(tmp_path):
    write_cell(tmp_path, ("banana", "KAMH", "code"), 2)
    write_summary(tmp_path, [("banana", "KAMH", "", 2, 4)])
    with pytest.warns(UserWarning, match="records no cell banana KAMH code"):
        results = km.load_results(tmp_path)
    assert results[("banana", "KAMH", "code")].posterior["x"].shape == (2, 4, 2)


def test_a_damaged_summary_is_an_error_naming_it(tmp_path):
    write_cell(tmp_path, ("banana", "KAMH"), 2)
    (tmp_path / "summary.json").write_text('{"cells": [')
    with pytest.raises(ValueError, match="summary.json cannot be read"):
        km.load_results(tmp_path)


def test_chains_a_later_unfinished_run_replaced_are_refused(tmp_path):
    # a rerun with another seed was stopped after rewriting chain 1 and its record
    write_cell(tmp_path, ("banana", "KAMH", "n=1000"), 2)
    write_cell(tmp_path, ("banana", "SM"), 2)
    write_summary(tmp_path, [("banana", "KAMH", "n=1000", 2, 4), ("banana", "SM", "", 2, 4)])
    for k in range(2):
        write_job(tmp_path, f"banana__SM__-__{k}", {**PARAMS, "paper": False})
    write_job(tmp_path, "banana__KAMH__n=1000__0", PARAMS)
    write_job(tmp_path, "banana__KAMH__n=1000__1", {**PARAMS, "seed": 8})
    with pytest.raises(ValueError, match=r"banana KAMH n=1000: chain 1 was made with .*'seed': 8"):
        km.load_results(tmp_path)
    write_job(tmp_path, "banana__KAMH__n=1000__1", PARAMS)
    assert len(km.load_results(tmp_path)) == 2
