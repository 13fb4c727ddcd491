// Fixed-choice options as types: an option parsed into its enum through the enum's one (name, value)
// table, so the code compares enums, never strings, and a bad value is refused at parse time.
#pragma once

#include <CLI/CLI.hpp>

#include <iterator>
#include <map>
#include <string>
#include <type_traits>
#include <vector>

namespace resil::app {

/// Add `flag` parsed through `table` (pairs of name and enum value) into `target` (the enum, or an
/// optional of it). IsMember runs first (a transform added later runs earlier): it refuses anything
/// else, the mapped numbers included, naming the option and the names (exit 2); CheckedTransformer
/// then maps the name to the value.
template <class Table, class Target>
CLI::Option* add_choice(CLI::App& app, const std::string& flag, Target& target, const Table& table, const std::string& help) {
  using E = std::decay_t<decltype(std::begin(table)->second)>;
  std::vector<std::string> names;
  std::map<std::string, E> map;
  for (const auto& [n, e] : table) {
    names.emplace_back(n);
    map.emplace(std::string(n), e);
  }
  return app.add_option(flag, target, help)
      ->transform(CLI::CheckedTransformer(map).description(""))  // IsMember lists the names in --help
      ->transform(CLI::IsMember(names));
}

}  // namespace resil::app
