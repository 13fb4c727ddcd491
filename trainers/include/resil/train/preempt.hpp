// Preemption: SIGTERM / SIGUSR1 set an async-signal-safe flag; the trainer polls it at every
// optimizer-step boundary, agrees on it across ranks (folded into the per-step MPI_Allreduce of
// the finite-weights check, so no extra collective and no effect on the numerics), commits a
// checkpoint with the exact data cursor and exits with ExitCode::preempted (75).
#pragma once

namespace resil::train {

/// Install the SIGTERM and SIGUSR1 handlers (sigaction, SA_RESTART). Idempotent.
void install_preempt_handlers();

/// The signal that asked for preemption (SIGTERM or SIGUSR1), or 0 when none arrived.
/// Async-signal-safe to set, cheap to read: a volatile sig_atomic_t.
int preempt_signal() noexcept;

/// Forget a received signal (tests; a library user that handled it).
void clear_preempt() noexcept;

/// "SIGTERM", "SIGUSR1", or "signal N".
const char* preempt_signal_name(int sig) noexcept;

}  // namespace resil::train
