"""The simulated airline of ACEBench's travel tasks: users, flights, reservations.

Written from the tools' descriptions in ``data_agent_multi_turn.json`` and the ground-truth end states; the rules
that decide an end state follow the authors' ``scenarios*/travel.py`` (fork yxli2123/ACEBench at 3717da5 and
e755b7c): free checked bags by membership and cabin, 50 yuan per extra bag; a new reservation is ``res_<n+1>``;
cancelling refunds to the cash balance (full refund when the airline cancelled or more than 24 hours before
departure, 10% fee otherwise; "now" is 2024-07-14 06:00) and keeps the reservation in the list, as there; a cabin
change pays or refunds the difference. Where the original raises (unknown user or flight), a message is returned
instead. Replies are in English in both languages.
"""

from __future__ import annotations

import datetime as _dt
from typing import Any

NOW = _dt.datetime(2024, 7, 14, 6, 0, 0)
BAG_FEE = 50
_FREE_BAGS = {"regular": (1, 2), "silver": (2, 3), "gold": (3, 3)}
"""Membership level -> free bags in (economy, business)."""
_TIME_FORMAT = "%Y-%m-%d %H:%M:%S"


class TravelApp:
    """Flight booking for three users."""

    name = "Travel"
    saved = ("users", "reservations")

    def __init__(self, world: dict[str, Any]) -> None:
        self.users: dict[str, dict[str, Any]] = world["users"]
        self.flights: list[dict[str, Any]] = world["flights"]
        self.reservations: list[dict[str, Any]] = world["reservations"]
        self.economy, self.business = world["cabins"]["economy"], world["cabins"]["business"]
        self.airline_cancellation = world["airline_cancellation_reason"]

    def _free_bags(self, level: str, cabin: str) -> int:
        economy, business = _FREE_BAGS.get(level, (0, 0))
        return economy if cabin == self.economy else business if cabin == self.business else 0

    def _price(self, flight: dict[str, Any], cabin: str) -> float:
        return flight["economy_price"] if cabin == self.economy else flight["business_price"]

    def _flight(self, flight_no: str) -> dict[str, Any] | None:
        return next((f for f in self.flights if f["flight_no"] == flight_no), None)

    def get_flight_details(self, origin: str | None = None, destination: str | None = None) -> Any:
        """Flights from ``origin`` to ``destination`` (either may be left out)."""
        found = [f for f in self.flights
                 if (not origin or f["origin"] == origin) and (not destination or f["destination"] == destination)]
        return [dict(f) for f in found] if found else "There are no direct flights that meet the criteria."

    def get_user_details(self, user_id: str, password: str) -> dict[str, Any]:
        """The profile of ``user_id`` (without the password) when ``password`` is right."""
        user = self.users.get(user_id)
        if user and user["password"] == password:
            return {k: v for k, v in user.items() if k != "password"}
        return {"status": "error", "message": "Incorrect username or password."}

    def get_reservation_details(self, reservation_id: str | None = None, user_id: str | None = None) -> Any:
        """Reservations by id, else by user, each with its flight."""
        if reservation_id:
            found = [r for r in self.reservations if r["reservation_id"] == reservation_id]
        elif user_id:
            found = [r for r in self.reservations if r["user_id"] == user_id]
        else:
            return {"status": "error", "message": "Please provide a valid reservation ID or user ID"}
        return [{**r, "flight_info": self._flight(r["flight_no"])} for r in found]

    def find_transfer_flights(self, origin_city: str, transfer_city: str, destination_city: str) -> Any:
        """Pairs of available flights origin -> transfer -> destination where the first lands before the second
        leaves."""
        first = [f for f in self.flights if f["origin"] == origin_city and f["destination"] == transfer_city
                 and f["status"] == "available"]
        second = [f for f in self.flights if f["origin"] == transfer_city and f["destination"] == destination_city
                  and f["status"] == "available"]
        pairs = [{"first_leg": a, "second_leg": b} for a in first for b in second
                 if _dt.datetime.strptime(a["arrival_time"], _TIME_FORMAT)
                 < _dt.datetime.strptime(b["depart_time"], _TIME_FORMAT)]
        return pairs or "No connecting flights that meet the criteria were found."

    def reserve_flight(self, user_id: str, password: str, flight_no: str, cabin: str, payment_method: str,
                       baggage_count: int) -> str:
        """Book ``flight_no`` in ``cabin`` paid by ``cash`` or ``bank``, with ``baggage_count`` checked bags."""
        user = self.users.get(user_id)
        if not user or user["password"] != password:
            return "Authentication failed. Please check your user ID and password."
        flight = next((f for f in self.flights if f["flight_no"] == flight_no and f["status"] == "available"), None)
        if flight is None:
            return f"Flight {flight_no} is not available."
        if payment_method not in ("cash", "bank"):
            return "Invalid payment method"
        extra_bags = max(int(baggage_count) - self._free_bags(user["membership_level"], cabin), 0)
        total = self._price(flight, cabin) + extra_bags * BAG_FEE
        balance_key = f"{payment_method}_balance"
        if total > user[balance_key]:
            return f"Your {payment_method} balance is insufficient. Please consider using another payment method."
        user[balance_key] -= total
        flight["seats_available"] -= 1
        reservation_id = f"res_{len(self.reservations) + 1}"
        self.reservations.append({"reservation_id": reservation_id, "user_id": user_id, "flight_no": flight_no,
                                  "payment_method": payment_method, "cabin": cabin, "baggage": baggage_count})
        return f"Booking successful. Reservation ID: {reservation_id}. Total cost: {total} yuan (including baggage fees)."

    def modify_flight(self, user_id: str, reservation_id: str, new_flight_no: str | None = None,
                      new_cabin: str | None = None, add_baggage: int = 0,
                      new_payment_method: str | None = None) -> str:
        """Change the flight (same route), the cabin (paying or refunding the difference) or add bags."""
        reservation = next((r for r in self.reservations
                            if r["reservation_id"] == reservation_id and r["user_id"] == user_id), None)
        if reservation is None:
            return "Reservation not found or user ID does not match."
        current = self._flight(reservation["flight_no"])
        if current is None:
            return "Flight information not found."
        user = self.users.get(user_id)
        if user is None:
            return "User information not found."
        payment = new_payment_method or reservation["payment_method"]
        notes = []
        if new_flight_no and new_flight_no != reservation["flight_no"]:
            new = self._flight(new_flight_no)
            if not new or (new["origin"], new["destination"]) != (current["origin"], current["destination"]):
                return "Flight change failed: Invalid new flight number or destination does not match."
            reservation["flight_no"] = new_flight_no
            notes.append("Flight number has been changed.")
        if new_cabin and new_cabin != reservation.get("cabin"):
            prices = {self.economy: current["economy_price"], self.business: current["business_price"]}
            difference = prices.get(new_cabin, 0) - prices.get(reservation["cabin"], 0)
            reservation["cabin"] = new_cabin
            if difference > 0:
                paid = self._pay(user, payment, difference)
                notes.append(f"Cabin change successful. Price difference paid: {difference}." if paid
                             else "Insufficient balance to pay the cabin price difference.")
            elif difference < 0:
                self._pay(user, payment, difference)
                notes.append(f"Cabin change successful. Price difference refunded: {-difference}.")
        if add_baggage and add_baggage > 0:
            total_bags = reservation.get("baggage", 0) + add_baggage
            cost = max(0, total_bags - self._free_bags(user["membership_level"], reservation["cabin"])) * BAG_FEE
            if cost > 0:
                paid = self._pay(user, payment, cost)
                notes.append(f"Baggage has been added. Additional fee to be paid: {cost}." if paid
                             else "Insufficient balance to pay the additional baggage fees.")
            reservation["baggage"] = total_bags
        return " ".join(notes) or "Modification completed with no additional fees."

    @staticmethod
    def _pay(user: dict[str, Any], method: str, amount: float) -> bool:
        """Take ``amount`` (negative: give back) from the ``method`` balance; ``False`` if it would go negative."""
        key = f"{method}_balance"
        if key not in user:
            return True
        if user[key] - amount < 0:
            return False
        user[key] -= amount
        return True

    def cancel_reservation(self, user_id: str, reservation_id: str, reason: str) -> str:
        """Cancel ``reservation_id`` of ``user_id``; the refund goes to the cash balance."""
        user = self.users.get(user_id)
        if not user:
            return "Invalid user ID."
        reservation = next((r for r in self.reservations
                            if r["reservation_id"] == reservation_id and r["user_id"] == user_id), None)
        if reservation is None:
            return "Invalid reservation ID or it does not belong to the user."
        flight = self._flight(reservation["flight_no"])
        if flight is None:
            return "Invalid flight information."
        departure = _dt.datetime.strptime(flight["depart_time"], _TIME_FORMAT)
        if NOW > departure:
            return "The flight segment has been used and cannot be canceled."
        price = self._price(flight, reservation["cabin"])
        if reason == self.airline_cancellation:
            user["cash_balance"] += price
            return f"The flight has been canceled. Your reservation will be canceled free of charge, and {price} " \
                   "yuan has been refunded."
        if departure - NOW > _dt.timedelta(days=1):
            user["cash_balance"] += price
            return f"More than 24 hours before departure. Free cancellation successful, {price} yuan has been refunded."
        fee = price * 0.1
        user["cash_balance"] += price - fee
        return f"Less than 24 hours before departure. A cancellation fee of {fee} yuan has been deducted, and " \
               f"{price - fee} yuan has been refunded."
