// Catch2 main for GPU tests: without a CUDA device, say so and exit 77, which CTest reports as skipped.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>

#include "resil/train/cuda.hpp"

int main(int argc, char** argv) {
  if (resil::train::cuda_device_count() == 0) {
    std::printf("skipped: %s\n", resil::train::cuda_device_description(0).c_str());
    return 77;
  }
  std::printf("device 0: %s\n", resil::train::cuda_device_description(0).c_str());
  return Catch::Session().run(argc, argv);
}
