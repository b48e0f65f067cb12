"""Epochs of ``DistributedSampler`` iterations (the ``sampler_epochs`` I line).

A shuffling ``torch.utils.data.distributed.DistributedSampler`` seeds its permutation with
``seed + epoch``; without ``sampler.set_epoch(epoch)`` before each epoch every epoch sees the same
order. Nothing runs at interpreter start: when the program imports
``torch.utils.data.distributed``, ``DistributedSampler.__iter__`` is wrapped to note, per sampler,
the ``epoch`` value of each iteration (once per epoch: no per-sample cost). After an iteration
the process writes ``{"sampler_epochs": {"iters", "shuffled_iters", "repeats", "epochs", "site"}}``
(cumulative over the process's samplers): ``repeats`` counts iterations of a shuffling sampler
with an epoch value it had already used, ``site`` is the program's line that started the first
such iteration.

Standard library only; never raises into the program; returns what ``__iter__`` returned.
"""

import sys

from .disguise import disguise

_MAX_SAMPLERS = 64
_S: dict = {"iters": 0, "shuffled": 0, "repeats": 0, "site": None, "epochs": {}, "last": []}


def _state():
    from .eventlog import STATE

    return STATE


def _note(sampler):
    shuffle = bool(getattr(sampler, "shuffle", False))
    epoch = getattr(sampler, "epoch", None)
    _S["iters"] += 1
    if shuffle:
        _S["shuffled"] += 1
        seen = _S["epochs"].get(id(sampler))
        if seen is None and len(_S["epochs"]) < _MAX_SAMPLERS:
            seen = _S["epochs"][id(sampler)] = set()
        if seen is not None:
            if epoch in seen:
                _S["repeats"] += 1
                if _S["site"] is None:
                    from .cudawatch import caller_site

                    _S["site"] = caller_site(sys._getframe(2))
            elif len(seen) < 4096:
                seen.add(epoch)
    _S["last"] = (_S["last"] + [epoch if isinstance(epoch, int) else None])[-8:]
    _state().update(sampler_epochs={"iters": _S["iters"], "shuffled_iters": _S["shuffled"],
                                    "repeats": _S["repeats"], "epochs": list(_S["last"]), "site": _S["site"]})


def patch(module):
    cls = getattr(module, "DistributedSampler", None)
    original = cls.__dict__.get("__iter__") if cls is not None else None
    if original is None or getattr(original, "__gpuscope__", False):
        return

    def __iter__(self):  # noqa: N807 - named as the method it stands for
        result = original(self)
        try:
            _note(self)
        except Exception:
            pass
        return result

    cls.__iter__ = disguise(__iter__, original, __gpuscope__=True)

