import json

from django.core.management.base import BaseCommand, CommandError

from apps.executions.worker import deadletters


class Command(BaseCommand):
    help = ("Show or clear the dead letters: messages a worker took from a run queue and could not read "
            "(docs/operations.md, \"Dead letters\").")

    def add_arguments(self, parser):
        actions = parser.add_subparsers(dest="action", required=True)
        show = actions.add_parser("list", help="newest first")
        show.add_argument("-n", "--limit", type=int, default=50)
        show.add_argument("--json", action="store_true", help="one stored entry (JSON) per line")
        purge = actions.add_parser("purge", help="drop them (all, or the oldest N)")
        purge.add_argument("--oldest", type=int, default=None, metavar="N")

    def handle(self, *args, action, **options):
        if deadletters.store_url() is None:
            raise CommandError("REDIS_URL is not set: dead letters are only logged")
        if action == "purge":
            count = options["oldest"]
            if count is not None and count < 1:
                raise CommandError("--oldest takes a positive number")
            self.stdout.write(f"{deadletters.purge(count)} dead letters dropped")
            return
        entries = deadletters.entries(max(1, options["limit"]))
        for entry in entries:
            if options["json"]:
                self.stdout.write(json.dumps(entry))
            else:
                self.stdout.write(f"{entry['at']}  {entry['queue']}  {entry['reason']}  (worker {entry['worker']})\n"
                                  f"    {entry['body'][:200]}")
        if not options["json"]:
            self.stdout.write(f"{len(entries)} shown, {deadletters.count()} kept")
