// The Hugging Face families Halformer reads: one entry each (family.h). A
// new family is its file under families/ and a line here.
#include "family.h"

namespace halformer {
namespace hf {

const Family &bert_family();
const Family &gemma2_family();
const Family &gemma3_text_family();
const Family &gpt2_family();
const Family &llama_family();
const Family &marian_family();
const Family &mistral_family();
const Family &mixtral_family();
const Family &olmo2_family();
const Family &phi3_family();
const Family &qwen2_family();
const Family &qwen3_family();
const Family &qwen3_moe_family();
const Family &t5_family();

const std::vector<const Family *> &families() {
    static const std::vector<const Family *> all{
        &bert_family(),    &gemma2_family(),  &gemma3_text_family(), &gpt2_family(),  &llama_family(),
        &marian_family(),  &mistral_family(), &mixtral_family(),     &olmo2_family(), &phi3_family(), &qwen2_family(),
        &qwen3_family(),   &qwen3_moe_family(), &t5_family()};
    return all;
}

const Family *find_family(const std::string &model_type) {
    for (const Family *f : families()) {
        if (model_type == f->model_type) return f;
    }
    return nullptr;
}

void norm(Rules &r, const std::string &ours, const std::string &theirs) {
    r[ours + "weight"] = {How::Same, {theirs + "weight"}};
    r[ours + "bias"] = {How::Same, {theirs + "bias"}};
}

}  // namespace hf
}  // namespace halformer
