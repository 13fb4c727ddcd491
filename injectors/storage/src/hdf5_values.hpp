// HDF5 values that are not tensors, as text `diff` compares: attributes of every object, and the
// elements of variable-length datasets (strings), whose stored bytes are heap addresses.
#pragma once

#include <hdf5.h>

#include <string>
#include <vector>

#include "resil/inject/storage.hpp"

namespace resil::inject {

/// Every attribute of every object in `file` (root group, groups, datasets, committed types; each
/// object once, under its first path in name order), named "<object path>@<attribute name>" ("/@x"
/// for the root). Throws CorruptInputError naming `path` when the walk fails.
std::vector<OtherContent> hdf5_attributes(hid_t file, const std::string& path);

/// The values of dataset `name` of `file` as text: strings quoted (bytes outside printable ASCII as
/// \xNN), integers up to 64 bits and floats in decimal (floats to 17 significant digits, a NaN with
/// its bits), other types as hex of their stored bytes; "<full type>[shape] <values>", or past 256
/// characters of values the XXH64 of the whole
/// rendering and its start. Read in slabs of rows: memory stays bounded. Object references
/// are the referenced object's path; other references and variable-length sequences are not
/// rendered (compared = false).
OtherContent hdf5_dataset_values(hid_t file, const std::string& name, const std::string& path);

/// hdf5_attributes and then hdf5_dataset_values of each of `vlen_datasets`, in a child process
/// with an address-space limit of 1 GiB beyond the parent's: HDF5 1.10 crashes on some damaged
/// attribute and heap messages and allocates what a damaged string length says. A crash or an
/// exhausted limit gives one item "@" not compared; an Error thrown there is thrown here.
std::vector<OtherContent> hdf5_other_values(hid_t file, const std::string& path, const std::vector<std::string>& vlen_datasets);

}  // namespace resil::inject
