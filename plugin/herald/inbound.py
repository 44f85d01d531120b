"""A device's messages to Hermes, and what they tell the plugin about the device.

Each ``inbound`` message from herald (text, voice, media, a command) becomes a
``MessageEvent`` from the chat's source. A gadget's profile comes with each of its
messages: it tells the model which device it talks to, and whether replies are spoken.
The first device that may talk becomes its platform's home channel (``auto_home``).
The event then goes to Hermes through :class:`FollowUps`, which holds it while the chat's
finished turn lets go.
"""

from __future__ import annotations

import json
import logging
import os
from typing import TYPE_CHECKING, Optional

from gateway.config import PlatformConfig
from gateway.platforms.base import MessageEvent, MessageType

from . import compat
from .followups import FollowUps
from .settings import flag
from .wire import Body, InboundArgs, Profile

if TYPE_CHECKING:
    from .adapter import HeraldAdapter

logger = logging.getLogger(__name__)

MEDIA_TYPES = {
    "image": MessageType.PHOTO,
    "video": MessageType.VIDEO,
    "audio": MessageType.AUDIO,
    "document": MessageType.DOCUMENT,
}


class Inbound:
    """One platform's messages from its devices, and the devices' names and speakers."""

    def __init__(self, adapter: HeraldAdapter, follow_ups: FollowUps) -> None:
        self._adapter = adapter
        self._follow_ups = follow_ups
        self._names: dict[str, str] = {}
        # Gadgets with a speaker, as their profiles last said.
        self._speakers: set[str] = set()

    def name_of(self, chat_id: str) -> str:
        """The name the chat's user last gave, else the chat's id."""
        return self._names.get(chat_id, chat_id)

    def has_speaker(self, chat_id: str) -> bool:
        return chat_id in self._speakers

    async def message(self, args: InboundArgs) -> None:
        source = args["source"]
        chat_id = source["chat"]["id"]
        user_name = source.get("user_name")
        body = args["body"]
        if user_name:
            self._names[chat_id] = user_name
        message_id = args["message_id"]
        event = message_event(body)
        if event is None:
            logger.warning("herald sent an inbound body Hermes has no message for: %r", body)
            return
        event.source = self._adapter.build_source(
            chat_id=chat_id,
            chat_type="dm",
            user_id=source["user_id"],
            user_name=user_name or None,
            message_id=message_id,
        )
        event.message_id = message_id
        profile = args.get("profile")
        if self._adapter.platform_name == "gadget" and profile is not None:
            self._describe_device(event, profile)
        self.claim_home(chat_id)
        await self._follow_ups.hand_over(event)

    def claim_home(self, chat_id: str) -> None:
        """``auto_home``: the first device that may talk becomes the platform's home
        channel, as if it had sent ``/sethome``, so cron and ``hermes send`` reach it."""
        adapter = self._adapter
        if not flag(adapter.config.extra, "auto_home", True):
            return
        variable = f"{adapter.platform_name.upper()}_HOME_CHANNEL"
        platforms = compat.platform_configs(adapter.gateway_runner)
        if os.getenv(variable) or platforms is None:
            return
        from gateway.config import HomeChannel
        from hermes_cli.config import save_env_value

        save_env_value(variable, chat_id)
        platform_config: PlatformConfig = platforms.setdefault(adapter.platform, adapter.config)
        platform_config.home_channel = HomeChannel(platform=adapter.platform, chat_id=chat_id, name=self.name_of(chat_id))
        logger.info("%s is now the %s home channel (auto_home)", chat_id, adapter.platform_name)

    def _describe_device(self, event: MessageEvent, profile: Profile) -> None:
        """Tell the model which device it talks to, and speak on one with a speaker.

        herald sends a gadget's profile with each of its messages (as it is then), so
        describing it costs no round trip.
        """
        chat_id = event.source.chat_id
        if not profile["paired"]:
            return
        event.channel_prompt = device_prompt(chat_id, self.name_of(chat_id), profile)
        if not profile["speaker_rate"]:
            self._speakers.discard(chat_id)
            return
        self._speakers.add(chat_id)
        if flag(self._adapter.config.extra, "speak_replies", True):
            # Every reply is spoken (Hermes's ``/voice tts``) unless the chat chose
            # otherwise. Only in memory: Hermes persists the mode when someone uses
            # ``/voice``, and ``/voice off`` in the chat wins from then on.
            compat.speak_by_default(self._adapter.gateway_runner, self._adapter, event.source)


def message_event(body: Body) -> Optional[MessageEvent]:
    """The Hermes message of an inbound body, without its source; None for a body that
    is not a message."""
    if body["kind"] == "text":
        return MessageEvent(text=body["text"], reply_to_message_id=body.get("reply_to") or None)
    if body["kind"] == "voice":
        transcript = body.get("transcript")
        if transcript:
            # The client already ran speech-to-text; Hermes need not do it again.
            return MessageEvent(text=transcript)
        return MessageEvent(
            text="",
            message_type=MessageType.VOICE,
            media_urls=[body["path"]],
            media_types=["audio/wav"],
        )
    if body["kind"] == "media":
        return MessageEvent(
            text=body.get("caption") or "",
            message_type=MEDIA_TYPES.get(body["media_kind"], MessageType.DOCUMENT),
            media_urls=[body["path"]],
            media_types=[body.get("mime") or "application/octet-stream"],
        )
    if body["kind"] == "command" and body["command"] in ("stop", "new"):
        return MessageEvent(text=f"/{body['command']}", message_type=MessageType.COMMAND)
    return None


def device_prompt(chat_id: str, name: str, profile: Profile) -> str:
    """What the model should know about a gadget, the same words every turn (so prompt
    caching holds) for as long as the device says the same about itself."""
    screen = profile["screen"]
    parts = [f'You are talking through the gadget "{name}" (id {chat_id}).']
    if screen and screen["width"] and screen["height"]:
        size = f"{screen['width']}x{screen['height']} pixels"
        if screen["text_cols"] and screen["text_rows"]:
            size += f", {screen['text_cols']} columns by {screen['text_rows']} rows of text"
        parts.append(f"Its screen is {size}.")
    else:
        parts.append("It has no screen.")
    if profile["charset"] == "ascii":
        parts.append("The screen shows ASCII only: other characters are transliterated or left out.")
    if profile["speaker_rate"]:
        parts.append("It has a speaker: write replies that read well aloud.")
    else:
        parts.append("It has no speaker: replies are only shown.")
    actions = [a for a in profile["actions"] if a["name"]]
    if actions:
        parts.append(f'Its actions, run with the gadget_action tool (device "{chat_id}"):')
        for action in actions:
            line = f"- {action['name']}: {action['description'] or 'no description'}"
            if action["params"]:
                line += f" (args: {json.dumps(action['params'], sort_keys=True)})"
            parts.append(line)
    return "\n".join(parts)
