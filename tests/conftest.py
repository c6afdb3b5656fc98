import os

import pytest
import torch

# Tests run on the CPU in double-checked float32; keep thread use modest on 2-core CI.
os.environ.setdefault("FEATLIB_DEVICE", "cpu")
torch.set_num_threads(min(2, torch.get_num_threads()))


@pytest.fixture(scope="session")
def repo_root():
    from featbook.notebooks import REPO_ROOT

    return REPO_ROOT


@pytest.fixture(scope="session")
def executed(tmp_path_factory):
    """Every chapter notebook executed once per session with the small profile (a few minutes)."""
    from featbook.notebooks import execute_all

    out = tmp_path_factory.mktemp("executed")
    execute_all("small", out, fresh=True)  # executed here, never outputs kept by an earlier build
    return out


@pytest.fixture(scope="session")
def built_book(request, tmp_path_factory):
    """The book staged from ``executed`` and rendered once per session; its HTML directory.
    ``FEATLIB_BUILT_BOOK=_build/html`` checks a book already built instead (the browser test
    on the output of ``python -m featbook.build``, without executing the notebooks again)."""
    from pathlib import Path

    from featbook.build import render, stage

    given = os.environ.get("FEATLIB_BUILT_BOOK")
    if given:
        if not (Path(given) / "index.html").is_file():
            pytest.fail(f"FEATLIB_BUILT_BOOK={given} holds no built book (index.html); build it with python -m featbook.build",
                        pytrace=False)
        return Path(given).resolve()
    executed = request.getfixturevalue("executed")
    root = tmp_path_factory.mktemp("book")
    stage(executed, root / "stage")
    return render(root / "stage", root)


#: Tests that take more than about 5 s on 2 cores (measured with ``pytest --durations``), besides
#: everything marked notebook, browser, fullsize or colab: left out of the fast tier.
SLOW_TESTS = {
    "test_training_claims.py": {"test_erm_converges_to_the_population_limit", "test_history_records_the_tracked_quantities",
                                "test_prop_4_3_irmv1_after_converged_erm_moves_towards_the_invariant_feature",
                                "test_alpha_sweep_flips_at_mean_beta", "test_theorem_4_2_irmv1_from_scratch_learns_no_feature",
                                "test_cor_4_4_irmv1_after_short_pretraining_loses_the_invariant_feature"},
    "test_wilds_pipeline.py": {"test_civilcomments_with_the_offline_text_backbone", "test_camelyon17_protocol_end_to_end",
                               "test_a_run_killed_after_its_first_round_resumes_without_redoing_it"},
    "test_stacked_training.py": {"test_experiment_stacked_equals_one_run_at_a_time",
                                 "test_experiment_resumes_without_redoing_finished_pieces",
                                 "test_ood_stage_bar_moves_as_each_frozen_stack_finishes"},
    "test_sweep.py": {"test_a_killed_sweep_resumes_without_rerunning_finished_runs", "test_local_2x2_sweep_records_every_combination",
                      "test_ray_sweep_gives_the_same_table", "test_a_failing_run_is_recorded_and_the_others_finish"},
    "test_saliency_study.py": {"test_the_study_trains_every_model_scores_it_and_reloads_it_from_the_cache",
                               "test_wilds_explanations_for_an_image_dataset"},
    "test_fast_ood_stage.py": {"test_compiled_path_equals_plain", "test_experiment_fast_path_equals_plain_path_at_table_level",
                               "test_benchmark_runs_end_to_end_on_a_cpu", "test_fast_training_equals_plain_float64_stacked_mlp",
                               "test_compiled_bias_relu_equals_plain"},
    "test_cost.py": {"test_the_wilds_case_measures_the_minibatch_learners_round_by_round",
                     "test_cli_prints_the_table_and_targets_and_writes_provenance",
                     "test_measure_labels_rounds_and_memory_follows_the_stored_state"},
    "test_feat_heads_and_rounds.py": {"test_wilds_runs_table_12s_rounds_unchecked_by_default_and_the_130_rule_by_name"},
    "test_gpu_paths.py": {"test_every_stack_of_a_protocol_run_executes_a_compiled_graph",
                          "test_the_benchmarks_compiled_variants_all_run_compiled_graphs"},
    "test_patch_colored_mnist.py": {"test_erm_cnn_picks_up_the_patch", "test_erm_snapshots_are_erm_at_each_epoch"},
    "test_user_files_and_integrity.py": {"test_case_6_a_reader_racing_commits_sees_one_whole_run_every_time",
                                         "test_case_2_cost_records_survive_a_kill_while_the_new_folder_is_swapped_in",
                                         "test_case_16_a_wait_on_a_lock_held_by_a_stopped_process_says_what_it_waits_for"},
    "test_trustworthy_results.py": {"test_2_two_processes_sharing_a_cache_folder_compute_each_piece_once"},
    "test_cmnist_presets.py": {"test_a_preset_runs_end_to_end_and_its_options_reach_the_ood_stage"},
    "test_feature_learning.py": {"test_feat_sets_partition_the_data_and_grow", "test_bonsai_rounds_and_synthesis"},
    "test_table2_pieces.py": {"test_pieces_from_two_folders_merge_into_the_table_of_one_run",
                              "test_a_folder_whose_cell_mixes_two_protocols_is_refused"},
    "test_memory_model.py": {"test_the_model_is_within_its_factor_of_the_peak_measured_around_a_protocol_run",
                             "test_the_model_grows_with_the_stack_as_the_measurement_does",
                             "test_the_cost_benchmarks_steps_measured_on_the_cpu_match_the_model"},
    "test_own_objective.py": {"test_the_example_runs_through_table2_beside_a_builtin_objective",
                              "test_the_example_runs_as_table2_pieces_that_record_its_file"},
    "test_extension_points.py": {"test_a_learner_in_one_file_runs_through_table_2_and_a_sweep",
                                 "test_a_dataset_in_one_file_runs_through_table_2_and_a_sweep"},
}
SLOW_MARKERS = ("notebook", "browser", "fullsize", "colab")


def pytest_collection_modifyitems(config, items):
    """Two tiers: ``make test-fast`` (``-m "not slow"``: library unit tests, a few minutes on 2
    cores) and ``make test`` (everything; CI). ``slow`` is given here to the tests of
    :data:`SLOW_TESTS` and to every test marked notebook, browser, fullsize or colab. The Colab tier
    (marker ``colab``: fresh environments, installs, every chapter) runs only when asked for:
    ``-m colab`` or ``FEATLIB_COLAB=1``."""
    slow = pytest.mark.slow
    for item in items:
        name = item.originalname if hasattr(item, "originalname") else item.name
        if any(m in item.keywords for m in SLOW_MARKERS) or name in SLOW_TESTS.get(item.path.name, ()):
            item.add_marker(slow)
    if "colab" in (config.getoption("-m") or "") or os.environ.get("FEATLIB_COLAB") == "1":
        return
    skip = pytest.mark.skip(reason="slow Colab tier: run with -m colab (or FEATLIB_COLAB=1)")
    for item in items:
        if "colab" in item.keywords:
            item.add_marker(skip)
