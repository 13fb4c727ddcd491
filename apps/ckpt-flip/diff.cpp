#include <cstdio>
#include <iostream>

#include "commands.hpp"
#include "resil/inject/diff.hpp"
#include "resil/inject/names.hpp"

namespace resil::app::ckpt_flip {

CLI::App* setup_diff(CLI::App& app, DiffOptions& o) {
  auto* c = app.add_subcommand("diff", "Compare two files dataset by dataset (differing elements, bit positions, errors, NaN/Inf).");
  c->footer(
      "Examples:\n"
      "  ckpt-flip diff ckpt.h5 bad.h5\n"
      "  ckpt-flip diff ckpt.h5 bad.h5 --json > diff.json");
  c->add_option("A", o.a, "first file")->required();
  c->add_option("B", o.b, "second file")->required();
  c->add_flag("--json", o.json, "machine-readable output");
  add_format_option(*c, o.format);
  return c;
}

int run_diff(const DiffOptions& o) {
  const auto rep = inject::diff(o.a, o.b, o.format);
  if (o.json) {
    std::cout << rep.to_json().dump(2) << "\n";
    return 0;
  }
  std::size_t differ = 0, unknown = 0;
  for (const auto& d : rep.datasets) {
    if (d.status == "same") continue;
    if (d.status == "unsupported") {
      ++unknown;
      std::cout << inject::display_name(d.path) << "  not compared (" << d.dtype << ")\n";
      continue;
    }
    ++differ;
    std::cout << inject::display_name(d.path) << "  " << d.status;
    if (d.status == "differ" && d.compared == "text") {
      std::cout << "  values differ (" << d.dtype << ")";
    } else if (d.status == "differ" && d.compared == "bytes") {
      std::cout << "  stored bytes differ (" << d.dtype << ")";
      if (d.differing_known) std::cout << ": " << d.differing << " of " << d.numel << " elements";
    } else if (d.status == "differ") {
      char buf[200];
      std::snprintf(buf, sizeof buf, "  %llu of %llu elements  max abs err %.6g  max rel err %.6g  NaN %llu->%llu  Inf %llu->%llu",
                    static_cast<unsigned long long>(d.differing), static_cast<unsigned long long>(d.numel), d.max_abs_error,
                    d.max_rel_error, static_cast<unsigned long long>(d.nan_a), static_cast<unsigned long long>(d.nan_b),
                    static_cast<unsigned long long>(d.inf_a), static_cast<unsigned long long>(d.inf_b));
      std::cout << buf << "\n    bits:";
      for (unsigned b = 0; b < 64; ++b)
        if (d.bit_histogram[b]) std::cout << " " << b << "x" << d.bit_histogram[b];
    }
    std::cout << "\n";
  }
  std::size_t other_unknown = 0;
  for (const auto& x : rep.others) {
    other_unknown += x.status == "unsupported";
    std::cout << inject::display_name(x.name) << "  " << (x.status == "unsupported" ? "not compared" : x.status);
    if (!x.a.empty()) std::cout << "  A: " << inject::display_name(x.a);
    if (!x.b.empty()) std::cout << (x.a.empty() ? "  B: " : "; B: ") << inject::display_name(x.b);
    std::cout << "\n";
  }
  const std::string n = std::to_string(rep.datasets.size());
  const std::size_t other_differ = rep.others.size() - other_unknown;
  std::string others = other_differ ? "; " + std::to_string(other_differ) + " other item(s) differ (not tensors)" : "";
  if (other_unknown) others += "; " + std::to_string(other_unknown) + " other item(s) not compared";
  // "identical" only when every tensor was compared and is the same, and nothing else differs.
  if (rep.identical()) std::cout << "identical: " << n << " dataset(s)\n";
  else if (!differ && !unknown) std::cout << "every one of " << n << " dataset(s) the same" << others << "\n";
  else if (!differ) std::cout << unknown << " of " << n << " dataset(s) not compared, none of the others differs" << others << "\n";
  else std::cout << differ << " of " << n << " dataset(s) differ" << (unknown ? ", " + std::to_string(unknown) + " not compared" : "") << others << "\n";
  return 0;
}

}  // namespace resil::app::ckpt_flip
