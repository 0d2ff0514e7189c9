"""Parametrizes `HuggingFaceFamilyTests` subclasses from their attributes."""


def pytest_generate_tests(metafunc):
    cls = metafunc.cls
    if cls is None or not hasattr(cls, "cases"):
        return
    if "case" in metafunc.fixturenames:
        metafunc.parametrize(
            "case", cls.cases, ids=[c.name for c in cls.cases], scope="class"
        )
    if "mesh_shape" in metafunc.fixturenames:
        metafunc.parametrize(
            "mesh_shape",
            cls.meshes,
            ids=["x".join(map(str, m)) for m in cls.meshes],
        )
