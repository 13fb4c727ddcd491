// Sampling text from a gpt checkpoint: the model's next-byte distribution, one byte at a time.
#include <cmath>

#include "resil/ckpt/checkpoint.hpp"
#include "resil/core/dmath.hpp"
#include "resil/core/rng.hpp"
#include "run.hpp"

namespace resil::train {

namespace stdfs = std::filesystem;

namespace {
constexpr std::uint64_t sample_purpose = 0x53414D504C45ull;  // "SAMPLE"
}

std::string sample(const stdfs::path& from, const std::string& prompt, int length, double temperature, std::uint64_t seed,
                   const std::optional<DeviceKind>& device) {
  if (length < 0) throw UsageError("--length must not be negative");
  if (!(temperature > 0.0)) throw UsageError("--temperature must be positive");
  const ckpt::Checkpoint c = read_whole(from);  // a file, or a tp manifest's shards put together
  check_meta(c.meta, from.string());
  TrainConfig cfg = config_of(c.meta, from.string());
  if (cfg.model != ModelKind::gpt)
    throw MismatchError(from.string() + ": checkpoint holds model '" + name(cfg.model) + "'; sample needs a gpt checkpoint");
  if (device) cfg.device = *device;
  cfg.parallel = ckpt::ParallelMode::none;
  cfg.reduce = ReduceKind::automatic;
  const Comm solo = Comm::world();
  Run run(cfg, solo, false);
  run.load_state(c, from.string());
  auto& model = dynamic_cast<Gpt&>(*run.model);
  std::vector<std::int32_t> tokens;
  for (const unsigned char ch : prompt.empty() ? std::string("%\n") : prompt) tokens.push_back(ch);
  Rng rng(derive_seed(seed, sample_purpose), 0);
  std::string out = prompt;
  std::vector<double> p;
  for (int i = 0; i < length; ++i) {
    const std::vector<float> logits = model.next_logits(tokens);
    // Non-finite weights give non-finite logits, which no distribution is made of (exit 6, as eval).
    for (const float z : logits)
      if (!std::isfinite(z))
        throw NumericError(from.string() + ": NaN/Inf in the next-byte logits at byte " + std::to_string(i + 1) + " of the sample: the checkpoint's weights are not finite there");
    // softmax(logits / temperature) in double, in index order, then the inverse CDF of one uniform draw
    double mx = logits[0] / temperature;
    for (const float z : logits) mx = std::max(mx, z / temperature);
    p.assign(logits.size(), 0.0);
    double sum = 0.0;
    for (std::size_t v = 0; v < logits.size(); ++v) sum += p[v] = dmath::exp(logits[v] / temperature - mx);
    const double u = rng.uniform() * sum;
    std::size_t next = 0;
    double acc = p[0];
    while (acc <= u && next + 1 < p.size()) acc += p[++next];
    tokens.push_back(static_cast<std::int32_t>(next));
    out.push_back(static_cast<char>(next));
  }
  return out;
}

}  // namespace resil::train
