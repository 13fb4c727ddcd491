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
/// (global decisions), AgreedError on every rank after a phase whose errors may be local (agree),
/// anything else may be local to one rank. The caller installs the preemption handlers
/// (train::install_preempt_handlers): a signal is honoured at the next step boundary.
int run(Config cfg, const Transport& net, const Progress& progress = {});

/// An error the ranks agreed on: thrown on every rank with the exit code of the lowest failing
/// rank's error; that rank is the reporter (it prints the line), the others stay silent.
class AgreedError : public Error {
public:
  AgreedError(const std::string& what, ExitCode code, bool reporter) : Error(what), code_(code), reporter_(reporter) {}
  ExitCode exit_code() const noexcept override { return code_; }
  bool reporter() const noexcept { return reporter_; }

private:
  ExitCode code_;
  bool reporter_;
};

/// Run `fn` on every rank (a phase whose errors may be local to some ranks: reading a checkpoint,
/// writing a shard) and agree on its outcome, so that no rank is left waiting in a collective and
/// the job ends without MPI_Abort: when any rank failed, every rank throws AgreedError.
void agree(const Transport& net, const std::function<void()>& fn);

}  // namespace resil::ecrm
