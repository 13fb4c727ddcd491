#include <iostream>
#include <optional>
#include <set>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "resil/ckpt/io.hpp"
#include "resil/inject/counts.hpp"
#include "resil/inject/names.hpp"
#include "resil/inject/plan.hpp"
#include "resil/inject/select.hpp"

namespace resil::app::ckpt_flip {

CLI::App* setup_inspect(CLI::App& app, InspectOptions& o) {
  auto* c = app.add_subcommand("inspect", "Show the file's format and its groups/datasets: dtype, shape, layout, filters, bytes, checksum, role, counter flag, fault space (stored, and what default filters sample).");
  c->footer(
      "Examples:\n"
      "  ckpt-flip inspect ckpt.h5\n"
      "  ckpt-flip inspect state_dict.h5 --json | jq '.total_bits, .sampled_bits'\n"
      "  ckpt-flip inspect last.ckpt --json | jq '.datasets[] | select(.role == \"optimizer\") | .dataset'\n"
      "  ckpt-flip inspect ckpt.h5 --verify        # also recompute the resil_xxh64 checksums");
  c->add_option("FILE", o.file, "checkpoint file")->required();
  c->add_flag("--json", o.json, "machine-readable output");
  c->add_flag("--verify", o.verify, "recompute checksums (reads every dataset)");
  add_format_option(*c, o.format);
  return c;
}

namespace {
const char* layout_name(ckpt::Layout l) {
  switch (l) {
    case ckpt::Layout::contiguous: return "contiguous";
    case ckpt::Layout::chunked: return "chunked";
    case ckpt::Layout::compact: return "compact";
    case ckpt::Layout::virtual_: return "virtual";
  }
  return "?";
}
}  // namespace

namespace {

// A location for a line of text: a set's file by its name (bytes from a directory listing: printed
// as names are), a distributed checkpoint's placement.
std::string location_text(const std::string& location) {
  const auto j = nlohmann::json::parse(location);
  if (j.contains("placement"))  // a distributed checkpoint: how the tensor is stored over the ranks (--json: its first chunk)
    return inject::display_name(j.at("placement").get<std::string>()) + " over " + std::to_string(j.value("world", 0)) + " rank(s)";
  if (!j.contains("file")) return inject::display_name(location);
  const auto file = j.at("file").get<std::string>();
  const auto bytes = j.value("file_escaped", false) ? inject::unescape_name(file) : std::optional<std::string>(file);
  return inject::display_name(bytes ? *bytes : file);
}

}  // namespace

int run_inspect(const InspectOptions& o) {
  const auto f = inject::open_storage(o.file, inject::Access::read, o.format);
  const auto tensors = f->tensors();
  // What inject and a campaign sample with default filters: select() with no option.
  std::set<std::string> sampled;
  try {
    for (const auto& t : inject::select(tensors, {})) sampled.insert(t.info.path);
  } catch (const NothingSelectedError&) {
  }
  nlohmann::json js = nlohmann::json::array();
  uint128_t total_bits = 0, sampled_bits = 0;  // beyond 64 bits on large enough files (counts.hpp)
  std::size_t counters = 0;
  std::string last_group;
  // The format as detected from the content (or forced): a .pt that is really HDF5 says so.
  const std::string format(inject::format_name(f->format()));
  if (!o.json) std::cout << o.file << "\nformat: " << format << "\n";
  for (const auto& t : tensors) {
    const auto& d = t.info;
    const char* role = inject::role_name(inject::effective_role(t));
    const bool counter = inject::counter_of(t);
    const bool in_sample = sampled.count(d.path) != 0;
    const bool readable = d.dtype && d.layout != ckpt::Layout::virtual_;
    const bool flippable = readable && d.external.empty();  // external raw files are never edited
    const auto bits = t.shared_with.empty() ? inject::fault_bits(d) : uint128_t{0};
    total_bits += bits;
    if (in_sample) sampled_bits += bits;
    counters += counter && bits > 0;
    std::string checksum = d.checksum ? "present" : "absent";
    if (o.verify && d.checksum && readable) {
      checksum = f->checksum(d.path) == *d.checksum ? "ok" : "MISMATCH";
    }
    // Where the tensor is in a set of files (its shard): the location of its first element.
    const std::string location = d.numel() ? f->location(d.path, 0).str() : std::string();
    std::string filters;
    for (const auto& x : d.filters) filters += (filters.empty() ? "" : "+") + x;
    if (o.json) {
      nlohmann::json j = {{"dtype", d.type_desc}, {"big_endian", d.big_endian}, {"shape", d.shape},
                          {"layout", layout_name(d.layout)}, {"chunks", d.chunks}, {"filters", d.filters},
                          {"stored_bytes", d.stored_bytes}, {"logical_bytes", d.logical_bytes}, {"checksum", checksum},
                          {"fault_bits", inject::count_json(bits)}, {"flippable", flippable},
                          {"role", role}, {"counter", counter}, {"sampled", in_sample}};
      inject::put_name(j, "dataset", d.path);
      // Text from the file (raw file names, an attribute, other names) is bytes: escaped and flagged as names are.
      inject::put_names(j, "external", d.external);
      if (!location.empty()) j["location"] = nlohmann::json::parse(location);
      if (d.null_space) j["null_dataspace"] = true;
      if (d.tp_slice) inject::put_name(j, "tp_slice", *d.tp_slice);  // a tp shard's slice of the global tensor, as stored
      if (!d.aliases.empty()) inject::put_names(j, "aliases", d.aliases);
      js.push_back(std::move(j));
      continue;
    }
    const std::string path = inject::display_name(d.path);
    const auto slash = path.rfind('/');
    const std::string group = path.substr(0, slash);
    if (group != last_group) {
      std::cout << "  " << (group.empty() ? "/" : group + "/") << "\n";
      last_group = group;
    }
    std::string external;
    for (const auto& x : d.external) external += (external.empty() ? " external " : ",") + inject::display_name(x);
    std::cout << "    " << path.substr(slash + 1) << "  " << d.type_desc << (d.big_endian ? "(BE)" : "")
              << (d.null_space ? "[] null dataspace (no element)" : ckpt::shape_string(d.shape))
              << "  " << layout_name(d.layout) << external << (d.chunks.empty() ? "" : " chunks " + ckpt::shape_string(d.chunks))
              << (filters.empty() ? "" : " " + filters) << "  " << d.stored_bytes << " B stored"
              << (location.empty() ? "" : "  in " + location_text(location))
              << "  checksum " << checksum << "  " << role << (counter ? " counter" : "") << "  fault space "
              << (!flippable ? (readable ? "none (external raw data, never edited)" : "none (unsupported type)")
                  : in_sample ? inject::count_string(bits) + " bits"
                              : inject::count_string(bits) + " bits, not sampled by default" + (counter ? " (a counter: --include it)" : ""));
    // A storage may have a million viewers: the line lists a few (--json lists them all).
    constexpr std::size_t listed_aliases = 8;
    if (d.tp_slice) std::cout << "  tp slice " << inject::display_name(*d.tp_slice);
    for (std::size_t k = 0; k < d.aliases.size() && k < listed_aliases; ++k) std::cout << "  also " << inject::display_name(d.aliases[k]);
    if (d.aliases.size() > listed_aliases) std::cout << "  and " << d.aliases.size() - listed_aliases << " other name(s) (--json lists them)";
    std::cout << "\n";
  }
  if (o.json) {
    nlohmann::json top = {{"format", format}, {"datasets", js}, {"total_bits", inject::count_json(total_bits)},
                          {"sampled_bits", inject::count_json(sampled_bits)}, {"counters", counters}};
    inject::put_name(top, "file", o.file);
    std::cout << top.dump(2) << "\n";
  } else {
    std::cout << tensors.size() << " dataset(s), fault space " << inject::count_string(total_bits) << " stored bits; with default filters inject and "
              << "campaigns sample " << inject::count_string(sampled_bits) << " bits (" << counters << " counter(s) left out unless --include names them)\n";
  }
  return 0;
}

}  // namespace resil::app::ckpt_flip
