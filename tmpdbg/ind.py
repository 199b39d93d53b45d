import os, glob, sys
os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(os.environ["OUT"], "indcache")
import torch
from torch._inductor.utils import run_and_get_code
N, C = 16384, 4096
x = torch.randn(N, C, device="cuda"); w = torch.randn(C, device="cuda"); b = torch.randn(C, device="cuda")
y = torch.randn(C, N, device="cuda")
fns = {
  "layernorm": (lambda x, w, b: torch.nn.functional.layer_norm(x, (C,), w, b), (x, w, b)),
  "transpose_add": (lambda x, y: x + y.t(), (x, y)),
  "rmsnorm": (lambda x, w: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w, (x, w)),
}
with open(os.path.join(os.environ["OUT"], "inductor_code.txt"), "w") as f:
    for name, (fn, args) in fns.items():
        torch._dynamo.reset()
        c = torch.compile(fn)
        _, codes = run_and_get_code(c, *args)
        for _ in range(3): c(*args)
        torch.cuda.synchronize()
        f.write(f"#### {name}\n")
        for code in codes:
            f.write(code)
    for p in glob.glob(os.path.join(os.environ["OUT"], "indcache", "**", "*.best_config"), recursive=True):
        f.write(f"#### best_config {p}\n" + open(p).read() + "\n")
import shutil; shutil.rmtree(os.path.join(os.environ["OUT"], "indcache"))
