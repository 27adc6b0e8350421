"""Group commit: threads that queue while a group runs form the next one, and wait doing `meanwhile`."""

import threading

from cortex.backends.group import GroupCommit


def test_threads_queued_while_a_group_runs_form_the_next_group_and_run_meanwhile_as_they_wait():
    groups, meanwhile, running, release = [], [], threading.Event(), threading.Event()

    def run_group(members):
        groups.append([member.fn() for member in members])
        if len(groups) == 1:
            running.set()
            release.wait(30)
        for member in members:
            member.succeed(member.fn() * 10)

    group = GroupCommit(run_group, meanwhile=lambda: meanwhile.append(threading.current_thread().name),
                        every=0.01)
    results = {}
    first = threading.Thread(target=lambda: results.update(first=group.run(lambda: 1)), name="first")
    first.start()
    assert running.wait(30)
    queued = [threading.Thread(target=lambda n=n: results.update({n: group.run(lambda: n)}), name=f"queued {n}")
              for n in (2, 3)]
    for thread in queued:
        thread.start()
    while not {"queued 2", "queued 3"} <= set(meanwhile):  # each waits, doing what it was given meanwhile
        threading.Event().wait(0.01)
    release.set()
    for thread in [first, *queued]:
        thread.join(30)
    assert groups == [[1], [2, 3]] or groups == [[1], [3, 2]]
    assert results == {"first": 10, 2: 20, 3: 30} and "first" not in meanwhile
