// The data a run trains and evaluates on (MNIST-format images, Criteo clicks or text, split into
// train and test) and the host staging that gathers one batch of it. Private to the trainer.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "resil/data/criteo.hpp"
#include "resil/data/idx.hpp"
#include "resil/data/text.hpp"
#include "resil/train/model.hpp"
#include "resil/train/trainer.hpp"

namespace resil::train {

struct Data {
  bool clicks = false;
  bool text = false;
  data::ImageSet train_img, test_img;
  data::ClickSet train_clk, test_clk;
  // text: windows of seq + 1 tokens; window i of a stream starts at token i * seq (data/text.hpp)
  data::TextCorpus corpus;
  int seq = 0;
  std::size_t train_windows = 0, test_windows = 0;
  std::size_t train_n() const { return text ? train_windows : clicks ? train_clk.n : train_img.n; }
  std::size_t test_n() const { return text ? test_windows : clicks ? test_clk.n : test_img.n; }
};

Data load_data(const TrainConfig& c);

/// Host staging for one batch: rows of the dataset picked by `idx`.
struct Staging {
  std::vector<float> x, targets;
  std::vector<std::int32_t> labels, sparse, tokens;
  Batch gather(const Data& d, bool test, std::span<const std::uint32_t> idx);
};

}  // namespace resil::train
