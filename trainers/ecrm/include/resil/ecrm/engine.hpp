// resil::ecrm: DLRM training with embedding tables sharded over the ranks (as parameter servers
// hold them) and data-parallel MLP replicas, the shards protected by Config::ft (config.hpp).
// One step, top to bottom, is Engine::train_step in trainers/ecrm/src/engine.cpp.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "resil/core/error.hpp"
#include "resil/ecrm/config.hpp"
#include "resil/ecrm/transport.hpp"

namespace resil::ecrm {

/// Progress of the step loop (rank 0 draws it): step(done, extra) after each step, end() once
/// the loop is over (before the summary). Either may be empty.
struct Progress {
  std::function<void(std::uint64_t step, const std::string& extra)> step;
  std::function<void()> end;
};

/// Run the whole job on every rank. Returns the process exit code (0, or 75 when preempted).
/// Throws resil::Error subclasses: UsageError and DataLossError are raised on every rank alike
/// (global decisions), train::PeerError on every rank after a phase whose errors may be local
/// (train::agree, resil/train/agree.hpp), anything else may be local to one rank. The caller installs the preemption handlers
/// (train::install_preempt_handlers): a signal is honoured at the next step boundary.
int run(Config cfg, const Transport& net, const Progress& progress = {});

}  // namespace resil::ecrm
