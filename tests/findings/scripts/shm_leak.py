"""Creates a shared-memory segment and never unlinks it: the resource tracker warns at shutdown."""
from multiprocessing import shared_memory

if __name__ == "__main__":
    shm = shared_memory.SharedMemory(create=True, size=1 << 16)
    shm.buf[:4] = b"gpsc"
    print("created", shm.name, flush=True)
    shm.close()           # closed, but never unlinked
