"""G4's set-up from G3: the operating point it reads, and the engine it must be."""

from gates.core.verdicts import Cause
from gates.proof import ServerIdentity
from gates.soak import OperatingPoint, other_engine

SIM = ServerIdentity(engine="kvgate-sim", simulated=True, evidence="X-KVGate-Simulator header")
LLAMA = ServerIdentity(engine="llama.cpp", version="b6000", evidence="GET /props")


def point(*served_by: str) -> OperatingPoint:
    return OperatingPoint(16, 1000.0, served_by)


def test_the_soak_on_g3s_engine_is_no_deviation_however_each_found_out():
    assert other_engine(point("kvgate-sim (X-KVGate-Simulator header)"), SIM) is None
    assert other_engine(point("kvgate-sim (GET /v1/models)"), SIM) is None
    assert other_engine(point("llama.cpp b6000 (GET /props)"), LLAMA) is None


def test_a_soak_on_another_engine_than_g3_measured_is_a_deviation_naming_both():
    """The embedded default with llama.cpp installed: G3 measured llama.cpp, G4 soaks the
    simulator [arms]; a G4 PASS there says nothing of llama.cpp."""
    found = other_engine(point("llama.cpp b6000 (GET /props)"), SIM)
    assert found.cause is Cause.SOAK_OTHER_ENGINE and found.blocks
    said = found.text
    assert said.startswith("G4 soaked kvgate-sim (X-KVGate-Simulator header), not the engine "
                           "G3 measured (llama.cpp b6000 (GET /props))"), said
    # Another version of the same engine is another engine.
    assert other_engine(point("llama.cpp b5999 (GET /props)"), LLAMA)
    # G3 served by two servers at its top level (a restart between repetitions, say): one of
    # them is not this one.
    assert other_engine(point("kvgate-sim (GET /v1/models)", "llama.cpp b6000 (GET /props)"),
                        SIM)


def test_a_soak_server_that_would_not_say_what_it_is_is_not_g3s():
    unknown = ServerIdentity(evidence="GET /v1/models named no owner")
    said = other_engine(point("llama.cpp b6000 (GET /props)"), unknown).text
    assert said.startswith("G4 soaked unknown (GET /v1/models named no owner), not the engine "
                           "G3 measured"), said
    # Two servers that would not say what they are are not known to be one engine.
    assert other_engine(point("unknown (GET /v1/models named no owner)"), unknown)


def test_an_older_g3_record_that_named_no_server_has_nothing_to_compare():
    assert other_engine(point(), SIM) is None
