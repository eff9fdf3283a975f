#!/bin/bash
# One accelerator stage of the bilingual trainer (training/compact/train_zh.py --device cuda), as run
# on a lent NVIDIA H200 (16 CPU cores) for checkpoint zh-gpu-step601. The machine has torch,
# transformers, onnxruntime, onnx, tokenizers, fontTools and Pillow, but neither the Debian fonts and
# texts nor rapidocr, so three files travel beside the working tree, in .devkit/ (prepared here):
#   python -m training.compact.kit --out /tmp/kit --latin-faces 40 --latin-lines 60000
#   (cd /tmp/kit && tar cf - . | xz -9) > .devkit/kit.tar.xz
#   xz -9 -c "$(python -c 'from models.compact.line.pptrunk import rec_model_path; print(rec_model_path())')" > .devkit/rec.onnx.xz
#   xz -9 -c models/compact/weights_zh/model.safetensors > .devkit/model.safetensors.xz   # the starting weights
# The CPU cores render and run the frozen PP trunk (zh_features --kit, one producer per core) while the
# GPU trains on the shards as they appear; the export (weights only, no ONNX) comes back in two parts
# under $OUT. Here: join the parts, copy tokenizer.json / generation_config.json from the starting
# checkpoint, then `python -m training.compact.script_head --checkpoint DIR --copy-from <start>`
# (same Latin tower: the script head is copied and the ONNX files are exported).
# Environment: W0 (first producer id; each id renders its own lines), NPROD, SHARES (zh_features
# --kind-shares), BUDGET (training seconds), TRAIN_TIMEOUT, LR, WARMUP, LATB (Latin replay batch).
set -u
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
T0=$(date +%s)
el() { echo "[+$(( $(date +%s) - T0 ))s] $*"; }
nvidia-smi -L
mkdir -p /tmp/kit /tmp/f /tmp/t
tar xJf .devkit/kit.tar.xz -C /tmp/kit &
xz -dc .devkit/rec.onnx.xz > /tmp/rec.onnx &
xz -dc .devkit/model.safetensors.xz > models/compact/weights_zh/model.safetensors &
wait
el unpacked
sha256sum /tmp/rec.onnx models/compact/weights_zh/model.safetensors
export INKSTREAM_PP_REC_MODEL=/tmp/rec.onnx
NPROD=${NPROD:-11}
for w in $(seq "${W0:-100}" $((${W0:-100} + NPROD - 1))); do
  python3 -m training.compact.zh_features --kit /tmp/kit --out /tmp/f --shards 1000 --per-shard 256 --worker "$w" \
    ${SHARES:+--kind-shares $SHARES} > "/tmp/p$w.log" 2>&1 &
done
el producers started
timeout "${TRAIN_TIMEOUT:-470}" python3 -m training.compact.train_zh --init models/compact/weights_zh --kit /tmp/kit \
  --features /tmp/f --out /tmp/t --device cuda --budget-seconds "${BUDGET:-360}" --batch 128 --latin-batch "${LATB:-48}" \
  --latin-workers 3 --lr "${LR:-4e-4}" --warmup "${WARMUP:-100}" --ctc-weight 0 --att-weight 0.5 --input-noise 0.1 \
  --latin-weight 1.5 --decoder-lr-scale 0.25 --ckpt-every 50 --eval-every 500 > "$OUT/train.log" 2>&1
el "trainer rc=$?"
pkill -f training.compact.zh_features
echo "shards: $(ls /tmp/f | wc -l)"
if [ -f /tmp/t/export/model.safetensors ]; then
  split -b 15000000 -d /tmp/t/export/model.safetensors "$OUT/model.part"
  cp /tmp/t/export/config.json "$OUT/"
  sha256sum /tmp/t/export/model.safetensors | tee "$OUT/sha256.txt"
fi
cp /tmp/t/log.jsonl "$OUT/" 2>/dev/null
tail -3 "$OUT/train.log"
el done
