#include <iostream>

#include "commands.hpp"
#include "resil/core/error.hpp"
#include "resil/inject/scan.hpp"
#include "resil/inject/names.hpp"

namespace resil::app::ckpt_flip {

CLI::App* setup_scan(CLI::App& app, ScanOptions& o) {
  auto* c = app.add_subcommand("scan", "Detect likely corruption without a golden copy; exit 0 clean, 10 suspect.");
  c->footer(
      "Flags checksum-attribute mismatches, NaN/Inf, and values whose exponent lies far above the\n"
      "tensor's own distribution (likely exponent flips).\n"
      "Examples:\n"
      "  ckpt-flip scan bad.h5 && echo clean\n"
      "  ckpt-flip scan bad.h5 --json");
  c->add_option("FILE", o.file, "checkpoint file")->required();
  c->add_flag("--json", o.json, "machine-readable output");
  add_format_option(*c, o.format);
  return c;
}

int run_scan(const ScanOptions& o) {
  const auto rep = inject::scan(o.file, o.format);
  if (o.json) {
    std::cout << rep.to_json().dump(2) << "\n";
  } else {
    for (const auto& d : rep.datasets) {
      if (!d.suspect()) continue;
      std::cout << inject::display_name(d.path) << "  " << d.dtype << "  checksum " << d.checksum << "  NaN " << d.nan << "  Inf " << d.inf
                << "  exponent outliers " << d.outliers;
      if (d.threshold_exponent)
        std::cout << " (exponent > " << *d.threshold_exponent << ", median " << *d.median_exponent << ")";
      else
        std::cout << " (no finite non-zero value)";
      if (d.max_abs)
        std::cout << "  max |x| " << *d.max_abs << " at " << d.max_abs_index << "\n";
      else
        std::cout << "  max |x| none (every value NaN)\n";
    }
    for (const auto& s : rep.skipped) std::cout << "skipped " << inject::display_name(s) << "\n";
    std::cout << (rep.suspect() ? "suspect" : "clean") << ": " << rep.datasets.size() << " dataset(s) scanned\n";
  }
  return rep.suspect() ? static_cast<int>(ExitCode::suspect) : 0;
}

}  // namespace resil::app::ckpt_flip
