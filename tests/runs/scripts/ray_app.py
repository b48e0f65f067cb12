"""A small Ray program as a new user writes it: a local cluster, two actors with an
@nvtx.annotate'd method, tasks (one calls an annotated helper). Prints the same with and without
gpuscope. ``--no-shutdown``: end without ray.shutdown() (Ray's atexit handler stops the cluster)."""
import pickle
import sys

import nvtx
import ray


@ray.remote
class Counter:
    def __init__(self, start):
        self.n = start

    @nvtx.annotate("incr", color="green")
    def incr(self, k):
        self.n += k
        return self.n


@nvtx.annotate()
def helper(x):
    return x + 1


@ray.remote
def square(x):
    with nvtx.annotate("square body"):
        return x * x


@ray.remote
def uses_helper(x):
    return helper(x)


def main():
    # address="local": a new local cluster, never one that runs on this machine already
    ray.init(address="local", num_cpus=2, object_store_memory=80 * 2**20, include_dashboard=False,
             log_to_driver=False)
    a, b = Counter.remote(0), Counter.remote(100)
    print("incr", ray.get([a.incr.remote(1), b.incr.remote(2), a.incr.remote(3)]))
    print("square", ray.get([square.remote(i) for i in range(5)]))
    print("helper", ray.get([uses_helper.remote(i) for i in range(2)]))
    # what gpuscope wraps in Ray pickles by reference like the original
    print("pickle ray.init", pickle.loads(pickle.dumps(ray.init)) is ray.init)
    print("pickle manager", pickle.loads(pickle.dumps(
        ray._private.function_manager.FunctionActorManager.get_execution_info))
          is ray._private.function_manager.FunctionActorManager.get_execution_info)
    if "--no-shutdown" not in sys.argv:
        ray.shutdown()
    print("done")


if __name__ == "__main__":
    main()
