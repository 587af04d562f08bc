import sys, time, torch, cProfile, pstats, qhybrid
torch.set_num_threads(1)
torch.manual_seed(0)
x = torch.rand(128, 8, dtype=torch.float64, requires_grad=True)
layer = qhybrid.ExpQLayer(8, 4).double()
def step():
    out = layer(x); out.sum().backward()
for _ in range(5): step()
pr = cProfile.Profile(time.thread_time); pr.enable()
for _ in range(30): step()
pr.disable()
pstats.Stats(pr).sort_stats(sys.argv[1] if len(sys.argv)>1 else "tottime").print_stats(30)
