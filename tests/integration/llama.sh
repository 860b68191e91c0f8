#!/usr/bin/env bash
# The Llama (model.type "llama") on real ranks (mpirun, no cluster needed),
# on a byte-level text corpus from Debian's fortunes, with grouped-query
# heads (4 heads, 2 kv heads) and Llama 3.1's rope_scaling:
#  - layouts 1x1, pipeline 2, data 2, 2x2 (data x pipeline), 2x2 with the
#    sharded optimizer and data 2 with parallel.grad_sync "shared" give the
#    same loss curve within 1e-5 relative over 50 steps, the head untied;
#  - with model.tie_word_embeddings, 1x1 and 2x2 follow one curve and the
#    head's copy (lm_head.weight, last stage) equals model.embed_tokens.weight
#    (stage 0) bitwise in both final checkpoints.
. "$(dirname "$0")/lib.sh"

corpus=/usr/share/games/fortunes
[ -f "$corpus/fortunes" ] || fail "$corpus/fortunes is missing (Debian package fortunes; make deps installs it)"
"$DTRAIN_BIN/dtrain-data" text "$corpus/riddles" "$T/text" >"$T/data.out" 2>&1 ||
	{ cat "$T/data.out"; fail "dtrain-data text"; }
cat >"$T/base.json" <<JSON
{ "name": "llama",
  "model": { "type": "llama", "vocab_size": 256, "context": 32, "layers": 4, "heads": 4, "kv_heads": 2,
             "embd": 32, "intermediate_size": 64,
             "rope_scaling": { "rope_type": "llama3", "factor": 8, "low_freq_factor": 1,
                               "high_freq_factor": 4, "original_max_position_embeddings": 64 } },
  "data": { "train": "$T/text/train.h5" },
  "train": { "epochs": 1, "max_steps": 50, "global_batch": 8, "log_every": 1,
             "optimizer": { "type": "adamw", "lr": 0.003, "weight_decay": 0.1, "betas": [0.9, 0.95] },
             "lr_schedule": { "warmup_steps": 5 }, "grad_clip": 1.0 },
  "checkpoint": { "every_steps": 50, "keep": 1 } }
JSON

# run NAME DATA PIPE MICRO [--set KEY=VALUE...]: train $T/base.json in $T/NAME
run() { mpi_run base "$@"; }

run l11 1 1 1
run p2 1 2 2
run d2 2 1 1
run l22 2 2 2
run s22 2 2 2 --set parallel.optimizer=sharded
run h2 2 1 1 --set parallel.grad_sync=shared
for l in p2 d2 l22 s22 h2; do same_curve l11 $l; done
pass "an untied Llama follows one loss curve on 1x1, pipeline 2, data 2, 2x2, sharded and shared"

# tied CKPT: the head's copy equals the embedding, bitwise
tied_llama() {
	h5diff "$1/shard-0.h5" "$(ls "$1"/shard-*.h5 | sort -V | tail -n 1)" \
		/model/model.embed_tokens.weight /model/lm_head.weight >"$T/tied.out" 2>&1 ||
		{ cat "$T/tied.out"; fail "$1: lm_head.weight differs from model.embed_tokens.weight"; }
}
run t11 1 1 1 --set model.tie_word_embeddings=true
run t22 2 2 2 --set model.tie_word_embeddings=true
same_curve t11 t22
for l in t11 t22; do tied_llama "$T/$l/checkpoints/step-00000050"; done
pass "a tied Llama: 1x1 and 2x2 follow one curve, the head's copy bitwise the embedding"
