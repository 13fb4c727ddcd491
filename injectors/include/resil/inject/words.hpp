// Stored words of tensors: the word I/O at file offsets (word_io.hpp) and the HDF5 adapter that
// locates them (hdf5_storage.hpp, class WordFile). Kept as one include for both.
#pragma once

#include "resil/inject/hdf5_storage.hpp"
#include "resil/inject/storage.hpp"
#include "resil/inject/word_io.hpp"
