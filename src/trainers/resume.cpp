/// @file resume.cpp
#include "trainers/resume.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>

#include "io/safetensors.hpp"
#include "util/errors.hpp"
#include "util/log.hpp"

namespace fh::trainers {

Resumed resume_run(io::RunDirectory& dir, ops::Device& ops, Trainer& trainer, const config::Profile& p,
                   EarlyStopping& early, std::int64_t n_bars) {
    const std::string last = dir.file_path("checkpoints/last.safetensors");
    const std::string best = dir.file_path("checkpoints/best.safetensors");
    Resumed r;
    r.record = load_checkpoint(last, ops, trainer, p, &early, n_bars);
    const long long at = trainer.progress();
    std::string unit = trainer.progress_unit();
    std::replace(unit.begin(), unit.end(), '_', ' ');

    // A finished run stays as it is unless the budget grows: its summary.json is final.
    const auto summary = dir.read_file("summary.json");
    const std::string status = summary ? io::summary_status(*summary) : "";
    const long long iterations = std::max<long long>(1, p.run.total_steps / trainer.progress_per_iteration());
    if ((status == "completed" || status == "early_stopped") && iterations <= trainer.iterations())
        throw UsageError(
            fmt::format("--resume {}: the run is finished (summary.json: status \"{}\", checkpoint at {} {}) "
                        "and run.total_steps = {} asks for nothing more; its files are left as they are. "
                        "To train it further, raise the budget: --resume {} --set run.total_steps={}",
                        dir.path(), status, at, unit, p.run.total_steps, dir.path(), std::max<long long>(at, 1) * 2));

    // The best weights: those of the best evaluation the checkpoint records. best.safetensors may
    // be newer than last.safetensors (written between it and the interruption): then the run
    // evaluates that stretch again and keeps what it finds.
    if (early.best() && std::filesystem::exists(best)) {
        const auto file = io::TensorFile::read(best);
        const std::string step = file.metadata("step").value_or("");
        if (step.empty() || step == fmt::format("{}", early.best_step()))
            r.best_weights =
                file.get<float>("params/online", {static_cast<std::uint64_t>(trainer.policy_weights().size())});
        else
            log::warn(
                "resume: checkpoints/best.safetensors is from {} {} but the checkpoint resumed records its best at "
                "{}: it was written after the checkpoint and will be recomputed",
                step, unit, early.best_step());
    }

    // Only now does the resumed run change files.
    const auto cleaned = dir.prepare_resume(at, trainer.progress_unit());
    if (cleaned.temporaries_removed > 0)
        log::info("resume: removed {} temporary file(s) left by an interrupted process", cleaned.temporaries_removed);
    if (cleaned.lines_dropped > 0)
        log::info("resume: dropped {} metrics/eval line(s) written after the checkpoint (they are written again)",
                  cleaned.lines_dropped);
    dir.write_file("config.toml", config::to_toml(p));
    log::info("resumed from {} at {} {} ({:.1f} s of earlier wall time){}", last, at, unit, r.record.wall_seconds,
              r.record.replay_omitted
                  ? fmt::format("; the checkpoint holds no replay memory (written with checkpoint.keep_replay = "
                                "false): the replay refills from empty and updates resume once it holds "
                                "replay_buffer.min_replay_size = {} transitions, so this resume is not exact",
                                p.replay_buffer.min_replay_size)
                  : "");
    return r;
}

}  // namespace fh::trainers
