# Sourced by the GPU-machine scripts that bench one synthetic model (gpu-ab-bench.sh, gpu-step-shares.sh): $out
# exists, .device points at the carried assets (DEVICE_DIR, default .device-lite) with its environment loaded,
# and `make_model BIN` leaves the model of SHAPE and TYPE (default llama3-8b Q4_K_M) at $model, made with
# `llm-run synth` and the vocabulary VOCAB (bpe, the default, or spm: what gpu-bench.sh gives the Llama-2 7B) the
# first time; `synth_model BIN SHAPE TYPE` does the same for another shape (scripts that bench several), so that
# every script of a call names a model the same way and makes it once.
out=${OUT:-/tmp/out}
mkdir -p "$out"
[ -e .device ] || ln -sfn "${DEVICE_DIR:-.device-lite}" .device  # env.sh names .device
source .device/env.sh >/dev/null
source "$(dirname "${BASH_SOURCE[0]}")/device-libs.sh"  # the HTTP library beside the binaries
shape=${SHAPE:-llama3-8b} type=${TYPE:-Q4_K_M} vocab=${VOCAB:-bpe}
model_path() { model=/tmp/$1-$2-$vocab.gguf; }  # SHAPE TYPE: $model, the path synth_model makes it at
synth_model() {  # BIN SHAPE TYPE: $model is that model's path, made the first time
  model_path "$2" "$3"
  [ -f "$model" ] || "$1" synth --shape "$2" --type "$3" \
    --vocab ".device/tokenizer/ggml-vocab-llama-$vocab.gguf" -o "$model" >/dev/null
}
model_path "$shape" "$type"
make_model() { synth_model "$1" "$shape" "$type"; }
