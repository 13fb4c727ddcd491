// Token and position embeddings.
#include "layers.hpp"

namespace resil::train::gpt {

Embedding::Embedding(Backend& be, int vocab, int context, int C, bool bf16)
    : wte(be, {vocab, C}), wpe(be, {context, C}), dwte(be, {vocab, C}), dwpe(be, {context, C}), be_(be), V_(vocab), C_(C), bf16_(bf16) {}

std::vector<ParamRef> Embedding::params() { return {{"wte.weight", &wte, &dwte}, {"wpe.weight", &wpe, &dwpe}}; }

const Tensor& Embedding::forward(const IntBuffer& tokens, int B, int T) {
  tokens_ = &tokens;
  B_ = B;
  T_ = T;
  out_.ensure(be_, {B * T, C_});
  be_.embedding_forward(tokens.data(), wte.data(), wpe.data(), out_.data(), B, T, C_);
  round_if(be_, out_, bf16_);
  return out_;
}

void Embedding::backward(const Tensor& dout) {
  be_.embedding_backward(dout.data(), tokens_->data(), dwte.data(), dwpe.data(), B_, T_, C_, V_);
}

}  // namespace resil::train::gpt
