"""`python -m stax.gpu.compile_worker`: compiles precompile.CompileJobs read from stdin.

Once its imports are done it answers (True, "ready"); then each job is a pickle on stdin
and each answer, (True, kernel name) or (False, the error), a pickle on stdout. Anything
Triton prints goes to stderr, so the answers stay parseable.
"""

import os
import pickle
import sys
import traceback


def main() -> None:
    answers = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    sys.stdout = sys.stderr
    os.dup2(sys.stderr.fileno(), 1)
    jobs = sys.stdin.buffer
    import torch  # noqa: F401 - generated modules import torch and triton: warm both before the first job
    import triton  # noqa: F401
    from stax.gpu.precompile import build

    pickle.dump((True, "ready"), answers)  # the parent hands out jobs only from now on
    answers.flush()
    while True:
        try:
            job = pickle.load(jobs)
        except EOFError:
            return
        try:
            build(job)
            answer = (True, job.kernel)
        except Exception:  # noqa: BLE001 - reported to the parent, which compiles it itself
            answer = (False, traceback.format_exc(limit=4))
        pickle.dump(answer, answers)
        answers.flush()


if __name__ == "__main__":
    try:
        main()
    except (BrokenPipeError, KeyboardInterrupt):  # the parent is gone: nothing to answer
        pass
