"""Who may use a node: its affiliations (XEP-0060 §4.1), listed and changed by an admin.

New queues are whitelisted (only affiliated JIDs subscribe), so letting a worker
in means making it a member. The command is the admin's face of XEP-0060 §8.9
(what an owner does with ``<affiliations/>``): one form with a JID list per
affiliation, one ``set_node_affiliations`` call for the whole submission (all
changes or none), as the service's system actor. An empty submission only lists.
"""

from __future__ import annotations

from xmpp_queue.admin.base import NODE_PREFIX, AdminCommand
from xmpp_queue.admin.errors import BadPayload
from xmpp_queue.admin.flow import CommandSession
from xmpp_queue.admin.forms import Submitted, add_field, add_fixed, new_form, table
from xmpp_queue.core.model import SYSTEM, Affiliation

AFFILIATION_COLUMNS = (("jid", "JID", None), ("affiliation", "Affiliation", None))
SETTABLE = tuple(Affiliation)
"""Every affiliation is a form field (a list of JIDs); ``none`` removes."""


class NodeAffiliations(AdminCommand):
    node = NODE_PREFIX + "affiliations"
    name = "Node affiliations"

    async def start(self, s: CommandSession, form: Submitted) -> None:
        self.ask_node(
            s,
            await self.all_nodes(),
            self.edit,
            instructions="Choose the node whose members, publishers and owners to see or set.",
            desc="Any node",
            empty="There are no nodes.",
        )

    async def edit(self, s: CommandSession, form: Submitted) -> None:
        node = self.chosen_node(s, form)
        entries = await self.service.get_node_affiliations(SYSTEM, node)
        question = new_form(
            f"{self.name}: {node}",
            "Give JIDs (bare, one per line) under the affiliation they get; 'none' removes. "
            "Leave every field empty to only list them.",
        )
        add_fixed(
            question,
            "Now: " + (", ".join(f"{e.jid} ({e.affiliation})" for e in entries) or "nobody"),
        )
        for aff in SETTABLE:
            add_field(question, var=str(aff), ftype="jid-multi", label=f"Make {aff}")
        s.ask(question, self.apply, final=True, back=self.start)

    async def apply(self, s: CommandSession, form: Submitted) -> None:
        node = s.memory["node"]
        changes: dict[str, Affiliation] = {}
        for aff in SETTABLE:
            for raw in form.values.get(str(aff), ()):
                if not raw.strip():
                    continue
                jid = Submitted({"jid": (raw,)}).jid("jid", f"Make {aff}", required=True)
                assert jid is not None
                bare = jid.split("/", 1)[0]
                if changes.get(bare, aff) is not aff:
                    raise BadPayload(f"{bare} is given two affiliations")
                changes[bare] = aff
        if changes:
            s.changed(await self.service.set_node_affiliations(SYSTEM, node, list(changes.items())))
        entries = await self.service.get_node_affiliations(SYSTEM, node)
        rows = [{"jid": e.jid, "affiliation": str(e.affiliation)} for e in entries]
        listing = table(f"Affiliations of {node}", AFFILIATION_COLUMNS, rows, "affiliations")
        if changes:
            done = ", ".join(f"{jid} {aff}" for jid, aff in changes.items())
            s.finish(f"'{node}': set {done}.", listing)
        else:
            s.finish(f"'{node}': {len(rows)} affiliation(s).", listing)
