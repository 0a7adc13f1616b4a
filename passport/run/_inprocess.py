"""The timed phase in this process: the runner sends the schedule on one event loop while
telemetry, the client monitor, the launched engine's watcher and (with `canary_share`) canaries
under load run beside it. How it stops: `passport.run._phase`."""

from __future__ import annotations

from passport.run._phase import (
    TimedInputs,
    TimedOutcome,
    new_runner,
    open_connections,
    quiet_interpreter,
    record_pacer,
    run_loop,
    start_beside,
    stopping,
)

__all__ = ["InProcess"]


class InProcess:
    """The Backend of a run sent by this process alone (`load.workers: 1`)."""

    def run(self, inputs: TimedInputs) -> TimedOutcome:
        return run_loop(_timed(inputs))


async def _timed(inputs: TimedInputs) -> TimedOutcome:
    halt = stopping()
    writers = requests_w, chunks_w, telemetry_w = halt.writers(inputs.folder)
    runner = new_runner(inputs.part, inputs.client, requests_w, chunks_w, halt, inputs.sink)
    beside = start_beside(inputs, telemetry_w, halt, client_monitor=True)
    try:
        with quiet_interpreter():
            await open_connections(inputs.client, inputs.spec.load.streams)
            results = await runner.run()
        if runner.abort_reason:
            if beside.watch is not None:  # refused connections are how an engine's death is often heard first
                await beside.watch.settle()
            halt.reasons.append(runner.abort_reason)
    finally:
        await beside.end()
        await inputs.client.aclose()
        record_pacer(inputs.client, telemetry_w, inputs.t0_ns)
        halt.close(writers)
    return TimedOutcome(results, halt.reason)
