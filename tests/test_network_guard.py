import socket

import pytest

from tests.conftest import OutsideNetworkError


def test_outside_lookup_fails_fast():
    with pytest.raises(OutsideNetworkError):
        socket.getaddrinfo("huggingface.co", 443)


def test_loopback_is_allowed():
    assert socket.getaddrinfo("127.0.0.1", 80)
