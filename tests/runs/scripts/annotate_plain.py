"""No pool: json.dumps (imported before the script starts), the script's own functions, an
inherited method. Prints what a user could observe of the wrappers: the same with or without
gpuscope."""
import json
import pickle


class Base:
    def step(self):
        return 1


class Child(Base):
    pass


class Other(Base):
    pass


def work(i):
    return json.dumps({"i": i})


def fails():
    raise ValueError("boom")


work(-1)  # a top-level call


def main():
    for i in range(3):
        work(i)
    print(Child().step() + Child().step() + Other().step() + Base().step())
    print(pickle.loads(pickle.dumps(work)) is work, pickle.loads(pickle.dumps(Child.step)) is Child.step)
    print(work.__name__, work.__qualname__, work.__module__, work.__doc__, Child.step.__name__)
    print(sorted(vars(Other)), "step" in vars(Base))
    try:
        fails()
    except ValueError as exc:
        import traceback

        print("".join(traceback.format_exception(type(exc), exc, exc.__traceback__)).count("File "))


if __name__ == "__main__":
    main()
