#include "resil/inject/raw.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <unordered_map>

#include "resil/inject/sampling.hpp"
#include "resil/core/fd.hpp"

namespace resil::inject {

std::vector<FlipRecord> plan_raw(const std::string& file, const PlanOptions& opt) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(file, ec);
  if (ec) throw IoError(file + ": cannot stat: " + ec.message());
  if (size == 0) throw NothingSelectedError(file + ": empty file, no bits to flip");
  if (opt.flips.has_value() == opt.ber.has_value()) throw UsageError("give exactly one of --flips N and --ber RATE");
  const std::uint64_t key = derive_seed(opt.seed, opt.trial);
  Rng rng(key, stream_sites);
  const std::uint64_t bits = size * 8;
  const auto draws = opt.flips ? draw_without_replacement(bits, *opt.flips, rng) : draw_bernoulli(bits, *opt.ber, rng);
  const Fd fd{::open(file.c_str(), O_RDONLY | O_CLOEXEC)};
  if (!fd) throw IoError(file + ": cannot open: " + std::strerror(errno));
  std::unordered_map<std::uint64_t, std::uint64_t> cur;
  Rng model_rng(key, stream_model);
  std::vector<FlipRecord> out;
  out.reserve(draws.size());
  for (const auto x : draws) {
    FlipRecord r;
    r.raw = true;
    r.index = x / 8;
    r.anchor = static_cast<unsigned>(x % 8);
    r.width = 8;
    auto it = cur.find(r.index);
    if (it == cur.end()) {
      unsigned char b = 0;
      if (::pread(fd.get(), &b, 1, static_cast<off_t>(r.index)) != 1)
        throw IoError(file + ": read failed at byte " + std::to_string(r.index));
      it = cur.emplace(r.index, b).first;
    }
    r.old_bits = it->second;
    r.new_bits = opt.model.apply(r.old_bits, 8, r.anchor, 0xff, model_rng);
    it->second = r.new_bits;
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace resil::inject
