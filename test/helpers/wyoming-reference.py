"""Drives voxd's Wyoming listener with the protocol's reference implementation, the Python package `wyoming` that
Home Assistant's Wyoming integration is built on, making the calls that integration makes.

    PYTHON wyoming-reference.py PORT CLIP.wav VOICE OUT_DIR

PYTHON must import `wyoming` (1.7 or later, for streaming; not in Debian or npm: `pip install wyoming` into a
virtual environment). Every event is read and parsed with the package's own classes (`Info.from_event` and the rest),
so a field voxd leaves out or mistypes fails here as it fails in Home Assistant. Prints one JSON object:

- "info": what Home Assistant reads of `info` (the installed programs, their models and voices);
- "transcripts": CLIP.wav transcribed at 16 kHz and at 22.05 kHz (resampled by the package's AudioChunkConverter,
  and written to OUT_DIR/clip-22050.wav for the same request over HTTP), each with the streamed events before it;
- "speech": a `synthesize` as Home Assistant's non-streaming path sends it, its audio in OUT_DIR/speech.wav;
- "streamed": a streaming synthesis with the compatibility `synthesize` in the middle, each audio group in
  OUT_DIR/streamed-N.wav;
- "error": what an unknown voice is answered with, and whether the connection closed after it.
"""

import asyncio
import json
import sys
import wave
from pathlib import Path

from wyoming.asr import Transcribe, Transcript, TranscriptChunk, TranscriptStart, TranscriptStop
from wyoming.audio import AudioChunk, AudioChunkConverter, AudioStart, AudioStop
from wyoming.client import AsyncTcpClient
from wyoming.error import Error
from wyoming.info import Describe, Info
from wyoming.tts import (
    Synthesize,
    SynthesizeChunk,
    SynthesizeStart,
    SynthesizeStop,
    SynthesizeStopped,
    SynthesizeVoice,
)

HOST = "127.0.0.1"
SAMPLES_PER_CHUNK = 1024
TIMEOUT_SECONDS = 60
STREAMED_TEXT = ["Hello ", "world. How", " are you", " today?"]


async def read(client):
    event = await asyncio.wait_for(client.read_event(), TIMEOUT_SECONDS)
    if event is None:
        raise RuntimeError("the server closed the connection")
    return event


async def describe(port):
    async with AsyncTcpClient(HOST, port) as client:
        await client.write_event(Describe().event())
        while True:
            event = await read(client)
            if Info.is_type(event.type):
                return Info.from_event(event)


def summary(info):
    asr = next(program for program in info.asr if program.installed)
    tts = next(program for program in info.tts if program.installed)
    return {
        "asr": {
            "name": asr.name,
            "attribution": asr.attribution.to_dict(),
            "supports_transcript_streaming": asr.supports_transcript_streaming,
            "models": [
                {"name": m.name, "installed": m.installed, "languages": m.languages, "version": m.version}
                for m in asr.models
            ],
        },
        "tts": {
            "name": tts.name,
            "supports_synthesize_streaming": tts.supports_synthesize_streaming,
            "voices": [{"name": v.name, "installed": v.installed, "languages": v.languages} for v in tts.voices],
        },
        "satellite": info.satellite is not None,
    }


def read_clip(path, rate):
    with wave.open(str(path), "rb") as clip:
        chunk = AudioChunk(
            rate=clip.getframerate(),
            width=clip.getsampwidth(),
            channels=clip.getnchannels(),
            audio=clip.readframes(clip.getnframes()),
        )
    return AudioChunkConverter(rate=rate, width=2, channels=1).convert(chunk)


def write_wav(path, rate, width, channels, pcm):
    with wave.open(str(path), "wb") as out:
        out.setframerate(rate)
        out.setsampwidth(width)
        out.setnchannels(channels)
        out.writeframes(pcm)


async def transcribe(port, audio):
    """As Home Assistant's speech-to-text entity: transcribe, the audio in chunks, then events until `transcript`."""
    async with AsyncTcpClient(HOST, port) as client:
        await client.write_event(Transcribe(language="en").event())
        await client.write_event(AudioStart(rate=audio.rate, width=audio.width, channels=audio.channels).event())
        step = SAMPLES_PER_CHUNK * audio.width * audio.channels
        for at in range(0, len(audio.audio), step):
            piece = audio.audio[at : at + step]
            chunk = AudioChunk(rate=audio.rate, width=audio.width, channels=audio.channels, audio=piece)
            await client.write_event(chunk.event())
        await client.write_event(AudioStop().event())
        events, chunks = [], []
        while True:
            event = await read(client)
            events.append(event.type)
            if TranscriptStart.is_type(event.type):
                TranscriptStart.from_event(event)
            elif TranscriptChunk.is_type(event.type):
                chunks.append(TranscriptChunk.from_event(event).text)
            elif Transcript.is_type(event.type):
                transcript = Transcript.from_event(event)
                return {"events": events, "chunks": chunks, "text": transcript.text, "language": transcript.language}
            elif Error.is_type(event.type):
                raise RuntimeError(Error.from_event(event).text)


async def audio_group(client, first=None):
    """The events of one audio-start ... audio-stop group, as AudioStart/AudioChunk/AudioStop parse them."""
    event = first or await read(client)
    start = AudioStart.from_event(event)
    pcm = bytearray()
    chunks = 0
    while True:
        event = await read(client)
        if AudioStop.is_type(event.type):
            AudioStop.from_event(event)
            group = {"rate": start.rate, "width": start.width, "channels": start.channels, "chunks": chunks}
            return group, bytes(pcm)
        chunk = AudioChunk.from_event(event)
        assert (chunk.rate, chunk.width, chunk.channels) == (start.rate, start.width, start.channels), event.data
        chunks += 1
        pcm += chunk.audio


async def synthesize(port, voice, out_dir):
    """As Home Assistant's non-streaming text-to-speech: one `synthesize`, audio until `audio-stop`."""
    async with AsyncTcpClient(HOST, port) as client:
        text = "Hello from voxd. This is Home Assistant speaking."
        await client.write_event(Synthesize(text=text, voice=SynthesizeVoice(name=voice)).event())
        group, pcm = await audio_group(client)
        write_wav(out_dir / "speech.wav", group["rate"], group["width"], group["channels"], pcm)
        return {"text": text, **group}


async def synthesize_streamed(port, voice, out_dir):
    """As Home Assistant 2025.7+ streams: start, chunks, the compatibility synthesize, stop; groups until stopped."""
    async with AsyncTcpClient(HOST, port) as client:
        chosen = SynthesizeVoice(name=voice)
        await client.write_event(SynthesizeStart(voice=chosen).event())
        for text in STREAMED_TEXT:
            await client.write_event(SynthesizeChunk(text=text).event())
        await client.write_event(Synthesize(text="".join(STREAMED_TEXT), voice=chosen).event())
        await client.write_event(SynthesizeStop().event())
        groups = []
        while True:
            event = await read(client)
            if SynthesizeStopped.is_type(event.type):
                return {"groups": groups}
            group, pcm = await audio_group(client, event)
            write_wav(out_dir / f"streamed-{len(groups)}.wav", group["rate"], group["width"], group["channels"], pcm)
            groups.append(group)


async def unknown_voice(port):
    async with AsyncTcpClient(HOST, port) as client:
        await client.write_event(Synthesize(text="Hi.", voice=SynthesizeVoice(name="nobody")).event())
        error = Error.from_event(await read(client))
        closed = await asyncio.wait_for(client.read_event(), TIMEOUT_SECONDS) is None
        return {"text": error.text, "code": error.code, "closed": closed}


async def main(port, clip, voice, out_dir):
    info = await describe(port)
    clip_22k = read_clip(clip, 22050)
    write_wav(out_dir / "clip-22050.wav", clip_22k.rate, clip_22k.width, clip_22k.channels, clip_22k.audio)
    report = {
        "info": summary(info),
        "transcripts": {
            "16000": await transcribe(port, read_clip(clip, 16000)),
            "22050": await transcribe(port, clip_22k),
        },
        "speech": await synthesize(port, voice, out_dir),
        "streamed": await synthesize_streamed(port, voice, out_dir),
        "error": await unknown_voice(port),
    }
    print(json.dumps(report))


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], Path(sys.argv[4])))
