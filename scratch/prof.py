import sys, time, torch, cProfile, pstats, pennylane as qml, qhybrid
torch.set_num_threads(1)
torch.manual_seed(0)
x = torch.rand(128, 8, dtype=torch.float64, requires_grad=True)
layer = qhybrid.ExpQLayer(8, 4).double()
def step():
    out = layer(x); out.sum().backward()
for _ in range(5): step()
from torch.profiler import profile, ProfilerActivity
with profile(activities=[ProfilerActivity.CPU]) as p:
    step()
ev = p.key_averages()
print("torch ops total calls:", sum(e.count for e in ev if e.key.startswith("aten::")))
print(ev.table(sort_by="self_cpu_time_total", row_limit=25))
pr = cProfile.Profile(); pr.enable()
for _ in range(20): step()
pr.disable()
pstats.Stats(pr).sort_stats("cumulative").print_stats(45)
