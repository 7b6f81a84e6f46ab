"""The registry of `netsum-ctl` verbs: command name → handler."""
from __future__ import annotations

from typing import Callable

from netsum.controller.session import Ctx
from netsum.controller.verbs_fabric import (cmd_dropsim_set, cmd_job_create, cmd_job_delete,
                                     cmd_job_fail, cmd_job_list, cmd_job_reap, cmd_job_reset,
                                     cmd_run, cmd_setup, cmd_stats, cmd_topo_show)
from netsum.controller.verbs_switch import (cmd_counter_read, cmd_counter_reset, cmd_mc_dump,
                                     cmd_mc_mgrp_create, cmd_mc_mgrp_destroy,
                                     cmd_mc_node_associate, cmd_mc_node_dissociate,
                                     cmd_pipeline_push, cmd_pipeline_show,
                                     cmd_set_queue_depth, cmd_set_queue_rate, cmd_shell,
                                     cmd_table_add, cmd_table_clear, cmd_table_delete,
                                     cmd_table_dump, cmd_table_modify, cmd_table_set_default)

__all__ = ["Ctx", "COMMANDS"]

COMMANDS: dict[str, Callable[[Ctx], int]] = {
    "table_add": cmd_table_add, "table_modify": cmd_table_modify,
    "table_delete": cmd_table_delete, "table_set_default": cmd_table_set_default,
    "table_dump": cmd_table_dump, "table_clear": cmd_table_clear,
    "counter_read": cmd_counter_read, "counter_reset": cmd_counter_reset,
    "mc_mgrp_create": cmd_mc_mgrp_create, "mc_mgrp_destroy": cmd_mc_mgrp_destroy,
    "mc_node_associate": cmd_mc_node_associate, "mc_node_dissociate": cmd_mc_node_dissociate,
    "mc_dump": cmd_mc_dump,
    "pipeline push": cmd_pipeline_push, "pipeline show": cmd_pipeline_show,
    "setup": cmd_setup, "run": cmd_run,
    "job create": cmd_job_create, "job list": cmd_job_list, "job delete": cmd_job_delete,
    "job reset": cmd_job_reset, "job fail": cmd_job_fail, "job reap": cmd_job_reap,
    "stats": cmd_stats, "dropsim set": cmd_dropsim_set,
    "shell": cmd_shell, "topo show": cmd_topo_show,
    "set_queue_depth": cmd_set_queue_depth, "set_queue_rate": cmd_set_queue_rate,
}
