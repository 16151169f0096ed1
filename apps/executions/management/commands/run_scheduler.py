from django.core.management.base import BaseCommand

from apps.executions.scheduling.process import SchedulerLoop
from cronsvc.gc_tuning import freeze_startup_objects


class Command(BaseCommand):
    help = "Run the beat-style scheduler loop (any number of copies may run at once)."

    def add_arguments(self, parser):
        parser.add_argument("--batch-size", type=int, default=None)
        parser.add_argument("--max-sleep", type=float, default=None)
        parser.add_argument("--sweep-interval", type=float, default=None)

    def handle(self, *args, batch_size, max_sleep, sweep_interval, **options):
        loop = SchedulerLoop(batch_size=batch_size, max_sleep=max_sleep, sweep_interval=sweep_interval)
        loop.install_signal_handlers()
        # A tick claims hundreds of jobs and allocates thousands of objects (cronsvc.gc_tuning).
        freeze_startup_objects()
        loop.run()
