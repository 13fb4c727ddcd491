// --finite (the peer tool's allowNaNValues=false): a fault site whose fault would leave a float
// NaN or Inf is redrawn, so every planned fault ends in a finite value. docs/reference/ckpt-flip.md, "--finite",
// says how this conditions the rates.
#pragma once

#include <cstdint>
#include <span>

#include "resil/ckpt/dtype.hpp"
#include "resil/inject/fault_model.hpp"
#include "resil/inject/sampling.hpp"

namespace resil::inject {

/// Whether a stored word of this float layout is a finite value: IEEE layouts (f64, f32, f16,
/// bf16, fp8 E5M2) reserve the all-ones exponent for Inf and NaN; OCP fp8 E4M3 (3 mantissa and 4
/// exponent bits, torch.float8_e4m3fn) has no Inf and one NaN per sign, S.1111.111.
bool finite_bits(ckpt::FloatLayout layout, std::uint64_t word) noexcept;
/// The same for a dtype; every word of an integer dtype is finite (--finite has no effect there).
/// The FNUZ fp8 dtypes, whose layouts match E4M3/E5M2 but not their codes, have 0x80 as their only
/// non-finite word.
bool finite_word(ckpt::DType t, std::uint64_t word) noexcept;

/// The word after site s's fault hits `old` (a word of `width` bits) under --finite: the model's
/// random draws (random-bits, burst, random-value, pattern) come from the site's own stream of
/// `key` (derive_seed(seed, trial)), so whether a candidate stays finite does not depend on which
/// other sites were drawn, and plan() reproduces what the draw tested.
std::uint64_t site_fault(const FaultModel& m, std::uint64_t key, const Site& s, std::uint64_t old, unsigned width,
                         std::uint64_t allowed);

/// Rejected draws a --finite plan may make before it gives up: 10^6 plus 100 per requested fault.
std::uint64_t max_rejected_draws(std::uint64_t requested) noexcept;

/// The --finite draw. Sites are drawn as sample_sites draws them, then tested one after another,
/// first those of the first draw in a random order (stream_finite), then redraws: a site is kept
/// when every record of its word's chain (its word's kept sites in site order, as plan() applies
/// them) leaves a finite value, else it counts as rejected and its stratum draws again, uniformly
/// among the sites not drawn yet. So the kept sites are the first N acceptable ones of a uniformly
/// random sequence without repetition. NothingSelectedError when a stratum runs out of undrawn sites
/// before N are kept, or after max_rejected_draws rejections.
Sampled sample_finite(std::span<const Target> targets, const PlanOptions& opt, const WordReader& read);

}  // namespace resil::inject
